package workloads

import "fmt"

// Instance is what a GPU instance type offers a pod: the allocatable share of
// its CPUs and memory after the kubelet's reservation and the node's
// DaemonSets (CNI, kube-proxy, CSI node, device plugin), and its GPUs.
type Instance struct {
	GPUs int
	// CPU and Memory are what a single fleet pod on the node may request.
	CPU, Memory string
	// MemoryLimit leaves room for /dev/shm inside the pod's limit.
	MemoryLimit string
	// Shm sizes /dev/shm (PyTorch's inter-process buffers; NCCL with
	// tensor parallelism wants more).
	Shm string
}

// instances are the EKS GPU instance types the provider knows. Memory and
// CPU requests stay below the EKS AL2023 allocatable for the type (kube
// reserved memory 255 MiB + 11 MiB per max pod, CPU 60-100m for the first
// cores) minus ~300m / 1 GiB of DaemonSets.
var instances = map[string]Instance{
	"g5.xlarge":    {GPUs: 1, CPU: "3", Memory: "12Gi", MemoryLimit: "14Gi", Shm: "2Gi"},
	"g5.2xlarge":   {GPUs: 1, CPU: "7", Memory: "26Gi", MemoryLimit: "29Gi", Shm: "4Gi"},
	"g5.4xlarge":   {GPUs: 1, CPU: "15", Memory: "56Gi", MemoryLimit: "60Gi", Shm: "8Gi"},
	"g5.8xlarge":   {GPUs: 1, CPU: "31", Memory: "116Gi", MemoryLimit: "122Gi", Shm: "16Gi"},
	"g5.12xlarge":  {GPUs: 4, CPU: "46", Memory: "176Gi", MemoryLimit: "184Gi", Shm: "32Gi"},
	"g5.48xlarge":  {GPUs: 8, CPU: "190", Memory: "700Gi", MemoryLimit: "740Gi", Shm: "64Gi"},
	"g6.xlarge":    {GPUs: 1, CPU: "3", Memory: "12Gi", MemoryLimit: "14Gi", Shm: "2Gi"},
	"g6.2xlarge":   {GPUs: 1, CPU: "7", Memory: "26Gi", MemoryLimit: "29Gi", Shm: "4Gi"},
	"g6e.xlarge":   {GPUs: 1, CPU: "3", Memory: "26Gi", MemoryLimit: "29Gi", Shm: "4Gi"},
	"g6e.2xlarge":  {GPUs: 1, CPU: "7", Memory: "56Gi", MemoryLimit: "60Gi", Shm: "8Gi"},
	"p4d.24xlarge": {GPUs: 8, CPU: "94", Memory: "1000Gi", MemoryLimit: "1100Gi", Shm: "64Gi"},
	"p5.48xlarge":  {GPUs: 8, CPU: "190", Memory: "1800Gi", MemoryLimit: "1900Gi", Shm: "64Gi"},
}

// LookupInstance returns the defaults for an instance type, or an error
// naming the types it knows (the caller then needs explicit resources).
func LookupInstance(instanceType string) (Instance, error) {
	in, ok := instances[instanceType]
	if !ok {
		return Instance{}, fmt.Errorf("instance type %q has no built-in resource defaults; set resources (cpu, memory, memory_limit, shm_size) explicitly", instanceType)
	}
	return in, nil
}
