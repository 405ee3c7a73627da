package workloads

import (
	"time"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// Fleet is everything that defines one vLLM fleet.
type Fleet struct {
	Name, Namespace string
	// ServedName is the model name requests carry (--served-model-name).
	ServedName string
	// ModelPath is model.path: with staging, the directory each commit is
	// staged beneath (ServedPath); without, the model's directory itself.
	// Relative to the volume's root; tokenizer.json and tokenizer_config.json
	// sit in the served directory.
	ModelPath string
	Storage   Storage
	Replicas  int32
	VLLM      VLLM
	KVEvents  KVEvents
	Resources Resources
	// NodeSelector and Tolerations place the pods (the GPU pool's label and taint).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// OnePerNode makes the scheduler put at most one fleet pod on a node.
	OnePerNode bool
	Rollout    Rollout
	Baseline   Baseline
	// Staging, when set, fills the volume before the rollout.
	Staging *Staging
	// Annotations go on the Deployment (the provider keeps its settings there).
	Annotations map[string]string
	// Autoscaling, when set, hands the replica count to a
	// HorizontalPodAutoscaler on the router's demand: the Deployment is
	// applied without replicas.
	Autoscaling *Autoscaling
}

// Autoscaling is the fleet's HorizontalPodAutoscaler and the router's part
// in it (router/autoscale).
type Autoscaling struct {
	// Min and Max bound the replicas; Min 0 lets the router take the idle
	// fleet to zero (the HPA's own minimum is then 1: below it the HPA
	// stands aside).
	Min, Max int32
	// TargetPerPod is the router's demand (requests in flight and waiting)
	// per pod the HPA aims at, and TargetWorkPerPod its work (tokens a
	// second); 0 leaves that metric out, and at least one is set.
	TargetPerPod, TargetWorkPerPod int64
	// ScaleDownDelay is the HPA's scale-down stabilization window: it
	// scales in to the highest recommendation of that window.
	ScaleDownDelay time.Duration
	// ScaleToZeroAfter is how long the fleet has no demand before the
	// router takes it to zero (with Min 0).
	ScaleToZeroAfter time.Duration
}

// The External metrics the router serves its demand and its work as
// (router/autoscale.MetricDemand and MetricWork).
const (
	DemandMetric = "llmd-router-demand"
	WorkMetric   = "llmd-router-work"
)

// Storage is where the weights are: an FSx for Lustre file system, which
// becomes a static PersistentVolume and its claim, a claim that exists, or
// an S3 bucket the pods stream from.
type Storage struct {
	FileSystemID, DNSName, MountName string
	// ExistingClaim, when set, is used instead of a volume of our own.
	ExistingClaim string
	// UnversionedNames keeps the volume and claim names of providers before
	// the file system id was in them (LegacyVolumeName), for a fleet that
	// applied its volume under that name and still has the same file system.
	UnversionedNames bool
	// S3, when set, keeps the weights in a bucket instead (no volume).
	S3 *S3Weights
}

// VLLM is the engine's image and settings.
type VLLM struct {
	Image                string
	BlockSize            int
	GPUMemoryUtilization float64
	MaxModelLen          int
	MaxNumSeqs           int
	TensorParallelSize   int
	// SchedulingPolicy is vLLM's --scheduling-policy: PolicyFCFS (vLLM's
	// default, also for "") or PolicyPriority, under which the engine's
	// waiting queue and its choice of a request to preempt follow each
	// request's priority, which the router sets from its classes.
	SchedulingPolicy string
	ExtraArgs        []string
	Env              map[string]string
}

// vLLM's scheduling policies (vllm/config/scheduler.py SchedulerPolicy,
// v0.32.0).
const (
	PolicyFCFS     = "fcfs"
	PolicyPriority = "priority"
)

// KVEvents are vLLM's KV-event publisher settings.
type KVEvents struct {
	Port, ReplayPort int
	// Topic is the router-side template ("kv@{ip}:{port}@{model}").
	Topic string
}

// Resources are one pod's requests and limits.
type Resources struct {
	CPU, Memory, MemoryLimit, Shm string
}

// Rollout bounds a rolling update and the pods' start and end.
type Rollout struct {
	MaxUnavailable, MaxSurge int
	// StartupSeconds is the budget for a cold load of the weights.
	StartupSeconds int
	// DrainSeconds is how long a pod told to stop (a rollout, a scale-in)
	// lets its open requests finish (vLLM's --shutdown-timeout; without
	// it vLLM aborts them on SIGTERM).
	DrainSeconds int
}

// fleetPreStop is how long a terminating vLLM pod keeps serving before
// SIGTERM, so that the baseline Service's endpoints (kube-proxy) stop
// sending it requests first; the router drops a terminating pod at once.
const fleetPreStop = 5

// Baseline is the round-robin Service beside the router, for A/B runs.
type Baseline struct {
	Enabled bool
	Name    string
	Exposure
}

// HTTPPort is where vLLM serves in the pod.
const HTTPPort = 8000

// MountPath is where the weights volume is mounted, read-only.
const MountPath = "/models"

// ModelRevisionKey on the pod template names the staged commit the pods serve.
const ModelRevisionKey = "llmd.dev/model-revision"

// managedFlags are the vllm serve flags the fleet sets itself; extra_args may not repeat them.
var managedFlags = []string{"--model", "--served-model-name", "--host", "--port", "--block-size", "--enable-prefix-caching",
	"--no-enable-prefix-caching", "--kv-events-config", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs",
	"--tensor-parallel-size", "-tp", "--disable-access-log-for-endpoints", "--enable-scale-out", "--shutdown-timeout",
	"--scheduling-policy"}

// managedEnv are environment variables the fleet sets; VLLM_PORT is
// refused because vLLM reads it as its own port setting (the Service-link clash).
// fileSystemID is an FSx file system id, which goes into object names.
var fileSystemID = regexp.MustCompile(`^fs-[0-9a-f]{8,17}$`)

var managedEnv = []string{"POD_IP", "USER", "VLLM_PORT", "HF_HUB_OFFLINE"}

// Validate checks the spec, naming the Terraform attribute at fault.
func (f Fleet) Validate() error {
	if f.Autoscaling != nil {
		if err := f.Autoscaling.validate(); err != nil {
			return err
		}
	}
	if f.Rollout.DrainSeconds < 0 {
		return fmt.Errorf("rollout.drain_timeout must be >= 0s, got %ds", f.Rollout.DrainSeconds)
	}
	for _, a := range f.VLLM.ExtraArgs {
		flag, _, _ := strings.Cut(a, "=")
		for _, m := range managedFlags {
			if flag == m {
				return fmt.Errorf("vllm.extra_args: %q is set by the fleet itself; use the matching attribute (block_size, gpu_memory_utilization, max_model_len, max_num_seqs, tensor_parallel_size, scheduling_policy, kv_events, model, rollout.drain_timeout) instead", a)
			}
		}
	}
	switch f.VLLM.SchedulingPolicy {
	case "", PolicyFCFS, PolicyPriority:
	default:
		return fmt.Errorf("vllm.scheduling_policy: %q is not %q or %q", f.VLLM.SchedulingPolicy, PolicyFCFS, PolicyPriority)
	}
	for k := range f.VLLM.Env {
		for _, m := range managedEnv {
			if k == m {
				return fmt.Errorf("vllm.env: %s is set by the fleet itself and may not be overridden", k)
			}
		}
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"kv_events.port", f.KVEvents.Port}, {"kv_events.replay_port", f.KVEvents.ReplayPort}} {
		if p.v == HTTPPort {
			return fmt.Errorf("%s: %d is vLLM's HTTP port; choose another", p.name, p.v)
		}
	}
	if f.KVEvents.Port == f.KVEvents.ReplayPort {
		return fmt.Errorf("kv_events.replay_port: equals kv_events.port (%d); vLLM needs two ports", f.KVEvents.Port)
	}
	if t := strings.NewReplacer("{ip}", "", "{port}", "", "{model}", "").Replace(f.KVEvents.Topic); strings.ContainsAny(t, "{}") {
		return fmt.Errorf("kv_events.topic: %q may use only the placeholders {ip}, {port} and {model}", f.KVEvents.Topic)
	}
	// vLLM's own --api-key does not count as a key here: it guards only
	// /v1, /v2 and /inference, and vLLM warns that /invocations serves the
	// same inference unauthenticated (vllm/entrypoints/openai/cli_args.py,
	// FrontendArgs.api_key).
	if err := f.Baseline.validate("baseline_service", false, ""); f.Baseline.Enabled && err != nil {
		return err
	}
	if f.Baseline.Enabled && f.Baseline.Name == "vllm" {
		return fmt.Errorf("baseline_service.name: \"vllm\" makes Kubernetes inject VLLM_PORT into pods, which vLLM misreads as its port; choose another name")
	}
	if s3 := f.Storage.S3; s3 != nil {
		if f.Storage.ExistingClaim != "" || f.Storage.FileSystemID != "" {
			return fmt.Errorf("storage: give one of s3_bucket, file_system_id (with dns_name and mount_name) or claim_name")
		}
		if err := s3.validate(f.ModelPath); err != nil {
			return err
		}
		for _, a := range f.VLLM.ExtraArgs {
			if flag, _, _ := strings.Cut(a, "="); flag == "--load-format" {
				return fmt.Errorf("vllm.extra_args: %q: weights in S3 are streamed with --load-format runai_streamer, which the fleet sets", a)
			}
		}
	} else if (f.Storage.ExistingClaim == "") == (f.Storage.FileSystemID == "") {
		return fmt.Errorf("storage: give either file_system_id (with dns_name and mount_name) or claim_name")
	}
	if f.Staging != nil && f.Staging.Image == "" {
		return fmt.Errorf("model.staging_image: empty; it runs the download")
	}
	if f.Storage.FileSystemID != "" && !fileSystemID.MatchString(f.Storage.FileSystemID) {
		return fmt.Errorf("storage.file_system_id: %q is not an FSx file system id (fs- and lowercase hex): pass llmd_inference_cluster.model_storage.file_system_id", f.Storage.FileSystemID)
	}
	if f.Storage.S3 == nil && f.Storage.ExistingClaim == "" && (f.Storage.DNSName == "" || f.Storage.MountName == "") {
		return fmt.Errorf("storage: file_system_id %s needs dns_name and mount_name too (llmd_inference_cluster.model_storage has all three)", f.Storage.FileSystemID)
	}
	for _, q := range []struct{ name, v string }{{"resources.cpu", f.Resources.CPU}, {"resources.memory", f.Resources.Memory},
		{"resources.memory_limit", f.Resources.MemoryLimit}, {"resources.shm_size", f.Resources.Shm}} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return fmt.Errorf("%s: %q is not a Kubernetes quantity (e.g. \"3\", \"500m\", \"12Gi\")", q.name, q.v)
		}
	}
	return nil
}

// Labels are on every object of the fleet; the selector is a stable subset.
func (f Fleet) Labels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "vllm",
		"app.kubernetes.io/instance":   f.Name,
		"app.kubernetes.io/component":  "decode",
		"app.kubernetes.io/part-of":    "llmd",
		"app.kubernetes.io/managed-by": "llmd",
		"llmd.dev/fleet":               f.Name,
	}
}

// Selector picks the fleet's pods (immutable on a Deployment, so it never changes).
func (f Fleet) Selector() map[string]string {
	return map[string]string{"llmd.dev/fleet": f.Name, "app.kubernetes.io/component": "decode"}
}

// ClaimName is the claim the pods mount; empty with S3 weights.
func (f Fleet) ClaimName() string {
	if f.Storage.S3 != nil {
		return ""
	}
	if f.Storage.ExistingClaim != "" {
		return f.Storage.ExistingClaim
	}
	return f.Name + "-weights" + f.volumeSuffix()
}

// volumeName is the static PV's cluster-wide name.
func (f Fleet) volumeName() string { return LegacyVolumeName(f.Namespace, f.Name) + f.volumeSuffix() }

// LegacyVolumeName is the static PV's name as providers before the file
// system id was in it named it.
func LegacyVolumeName(namespace, name string) string { return namespace + "-" + name + "-weights" }

// volumeSuffix puts the file system id in the volume's and the claim's
// names: a PV's source and a bound claim's volume never change, so a new
// file system must be a new volume and claim (the pods roll to it and the
// old pair is pruned), never an update Kubernetes refuses.
func (f Fleet) volumeSuffix() string {
	if f.Storage.UnversionedNames || f.Storage.FileSystemID == "" {
		return ""
	}
	return "-" + f.Storage.FileSystemID
}

// BaselineName is the baseline Service's name.
func (f Fleet) BaselineName() string {
	if f.Baseline.Name != "" {
		return f.Baseline.Name
	}
	return f.Name + "-baseline"
}

// RouterTarget is everything a router needs to follow and reach the fleet.
type RouterTarget struct {
	Namespace, Selector                string
	HTTPPort, KVEventsPort, ReplayPort int
	Topic                              string
	BlockSize                          int
	ServedModel                        string
	ClaimName, ModelPath               string
	// TokenizerPath and TokenizerConfigPath are relative to the claim's
	// root, or s3:// URIs with S3 weights (S3Region is then the bucket's
	// region, and the router reads them with its own Pod Identity).
	TokenizerPath, TokenizerConfigPath string
	S3Region                           string
	// S3ReaderRole is the IAM role (name) that reads the fleet's weights,
	// which the router binds its own service account to.
	S3ReaderRole string
	// MaxNumSeqs is vLLM's --max-num-seqs: the most requests one pod runs
	// at once, the router's default capacity of a pod.
	MaxNumSeqs int
	// SchedulingPolicy is the engines' (VLLM.SchedulingPolicy); under
	// PolicyPriority the router sets each request's priority from its class.
	SchedulingPolicy string
	// Deployment is the fleet's Deployment; Autoscaled says an HPA scales
	// it on the router's demand, which the router then serves; and
	// ScaleToZero, when set, is how long the fleet has no demand before the
	// router takes it to zero (and back from zero for a request).
	Deployment       string
	Autoscaled       bool
	ScaleToZeroAfter time.Duration
}

// Target reports the fleet as the router sees it.
func (f Fleet) Target() RouterTarget {
	t := RouterTarget{Namespace: f.Namespace, Selector: selectorString(f.Selector()), HTTPPort: HTTPPort,
		KVEventsPort: f.KVEvents.Port, ReplayPort: f.KVEvents.ReplayPort, Topic: f.KVEvents.Topic, BlockSize: f.VLLM.BlockSize,
		ServedModel: f.ServedName, ClaimName: f.ClaimName(), ModelPath: f.ServedPath(),
		TokenizerPath: path.Join(f.ServedPath(), "tokenizer.json"), TokenizerConfigPath: path.Join(f.ServedPath(), "tokenizer_config.json"),
		MaxNumSeqs: f.VLLM.MaxNumSeqs, SchedulingPolicy: f.VLLM.SchedulingPolicy, Deployment: f.Name}
	if f.Storage.S3 != nil {
		t.ModelPath = f.S3URI()
		t.TokenizerPath, t.TokenizerConfigPath = f.s3TokenizerPaths()
		t.S3Region = f.Storage.S3.Region
	}
	if a := f.Autoscaling; a != nil {
		t.Autoscaled = true
		if a.Min == 0 {
			t.ScaleToZeroAfter = a.ScaleToZeroAfter
		}
	}
	return t
}

func selectorString(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Args are the vllm serve arguments, with $(POD_IP) expanded by the kubelet.
func (f Fleet) Args() ([]string, error) {
	topic := strings.NewReplacer("{ip}", "$(POD_IP)", "{port}", fmt.Sprint(HTTPPort), "{model}", f.ServedName).Replace(f.KVEvents.Topic)
	kv, err := json.Marshal(map[string]any{
		"enable_kv_cache_events": true, "publisher": "zmq",
		"endpoint":        fmt.Sprintf("tcp://*:%d", f.KVEvents.Port),
		"replay_endpoint": fmt.Sprintf("tcp://*:%d", f.KVEvents.ReplayPort),
		"topic":           topic, "buffer_steps": 10000, "hwm": 100000,
	})
	if err != nil {
		return nil, err
	}
	model := path.Join(MountPath, f.ServedPath())
	if f.Storage.S3 != nil {
		model = f.S3URI()
	}
	args := []string{model,
		"--served-model-name", f.ServedName,
		"--host", "0.0.0.0", "--port", fmt.Sprint(HTTPPort),
		"--block-size", fmt.Sprint(f.VLLM.BlockSize),
		"--enable-prefix-caching",
		"--gpu-memory-utilization", fmt.Sprint(f.VLLM.GPUMemoryUtilization),
		"--max-model-len", fmt.Sprint(f.VLLM.MaxModelLen),
		"--max-num-seqs", fmt.Sprint(f.VLLM.MaxNumSeqs),
		"--tensor-parallel-size", fmt.Sprint(f.VLLM.TensorParallelSize),
		"--kv-events-config", string(kv),
		// The probes (every 5-10 s per pod) and the scrapes would otherwise
		// be most of the access log (FrontendArgs.disable_access_log_for_endpoints,
		// vllm/entrypoints/openai/cli_args.py, in vLLM since 0.16).
		"--disable-access-log-for-endpoints", "/health,/metrics",
		// The render endpoints the router's tokenizer canary falls back to:
		// opt-in since v0.30.0, by this flag instead of the environment
		// variable VLLM_ENABLE_SCALE_OUT_ENDPOINTS (vLLM #55176,
		// vllm/entrypoints/scale_out/factories.py; v0.30.0 release notes).
		"--enable-scale-out",
		// On SIGTERM, refuse new requests and let open ones finish (vLLM
		// #34730, vllm/engine/arg_utils.py in v0.32.0: the default 0 aborts
		// them), within the pod's grace period.
		"--shutdown-timeout", fmt.Sprint(f.Rollout.DrainSeconds),
	}
	if f.VLLM.SchedulingPolicy == PolicyPriority { // fcfs is vLLM's default: a fleet that had none keeps its pods
		args = append(args, "--scheduling-policy", PolicyPriority)
	}
	if f.Storage.S3 != nil {
		args = append(args, "--load-format", "runai_streamer")
	}
	return append(args, f.VLLM.ExtraArgs...), nil
}

// Objects are the fleet's objects in apply order. withPodMonitor adds the
// PodMonitor (only when the cluster serves its CRD).
func (f Fleet) Objects(withPodMonitor bool) ([]kube.Object, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	args, err := f.Args()
	if err != nil {
		return nil, err
	}
	labels := f.Labels()
	var acs []any
	acs = append(acs, corev1ac.Namespace(f.Namespace).WithLabels(map[string]string{"app.kubernetes.io/managed-by": "llmd"}))
	switch {
	case f.Storage.S3 != nil:
		acs = append(acs, f.s3ServiceAccounts(labels)...)
	case f.Storage.ExistingClaim == "":
		acs = append(acs, f.volume(labels), f.claim(labels))
	}
	if f.Staging != nil {
		acs = append(acs, f.stagingJob(labels))
	}
	acs = append(acs, f.deployment(labels, args))
	if f.Baseline.Enabled {
		acs = append(acs, f.service(labels))
	}
	if f.Autoscaling != nil {
		acs = append(acs, f.autoscaler(labels))
	}
	acs = append(acs, policyv1ac.PodDisruptionBudget(f.Name, f.Namespace).WithLabels(labels).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(f.Selector()))))
	if withPodMonitor {
		acs = append(acs, f.podMonitor(labels))
	}
	objs := make([]kube.Object, 0, len(acs))
	for _, ac := range acs {
		o, err := kube.FromApplyConfiguration(ac)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

func (f Fleet) volume(labels map[string]string) any {
	return corev1ac.PersistentVolume(f.volumeName()).WithLabels(labels).WithSpec(corev1ac.PersistentVolumeSpec().
		WithCapacity(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1200Gi")}).
		WithAccessModes(corev1.ReadWriteMany).
		WithPersistentVolumeReclaimPolicy(corev1.PersistentVolumeReclaimRetain).
		WithStorageClassName("").
		WithMountOptions("flock").
		WithClaimRef(corev1ac.ObjectReference().WithNamespace(f.Namespace).WithName(f.ClaimName())).
		WithCSI(corev1ac.CSIPersistentVolumeSource().WithDriver("fsx.csi.aws.com").WithVolumeHandle(f.Storage.FileSystemID).
			WithVolumeAttributes(map[string]string{"dnsname": f.Storage.DNSName, "mountname": f.Storage.MountName})))
}

func (f Fleet) claim(labels map[string]string) any {
	return corev1ac.PersistentVolumeClaim(f.ClaimName(), f.Namespace).WithLabels(labels).WithSpec(corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteMany).WithStorageClassName("").WithVolumeName(f.volumeName()).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1200Gi")})))
}

func (f Fleet) deployment(labels map[string]string, args []string) any {
	gpus := corev1.ResourceName("nvidia.com/gpu")
	tp := resource.MustParse(fmt.Sprint(f.VLLM.TensorParallelSize))
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("POD_IP").WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("status.podIP"))),
		// vLLM >= 0.20 needs USER in containers that run without a passwd entry.
		corev1ac.EnvVar().WithName("USER").WithValue("vllm"),
		// The weights are on the volume or in the bucket: never reach out to the Hub.
		corev1ac.EnvVar().WithName("HF_HUB_OFFLINE").WithValue("1"),
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("dshm").WithMountPath("/dev/shm")}
	volumes := []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("dshm").WithEmptyDir(corev1ac.EmptyDirVolumeSource().
		WithMedium(corev1.StorageMediumMemory).WithSizeLimit(resource.MustParse(f.Resources.Shm)))}
	if f.Storage.S3 != nil {
		// The streamer signs for the bucket's region; EKS Pod Identity
		// gives the credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI).
		env = append(env, corev1ac.EnvVar().WithName("AWS_REGION").WithValue(f.Storage.S3.Region))
	} else {
		mounts = append([]*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("weights").WithMountPath(MountPath).WithReadOnly(true)}, mounts...)
		volumes = append([]*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("weights").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(f.ClaimName()).WithReadOnly(true))}, volumes...)
	}
	keys := make([]string, 0, len(f.VLLM.Env))
	for k := range f.VLLM.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, corev1ac.EnvVar().WithName(k).WithValue(f.VLLM.Env[k]))
	}
	probe := func(period, failures int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/health").WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(period).WithFailureThreshold(failures).WithTimeoutSeconds(5)
	}
	startupFailures := int32(max(f.Rollout.StartupSeconds/10, 1))
	container := corev1ac.Container().WithName("vllm").WithImage(f.VLLM.Image).
		WithCommand("vllm", "serve").WithArgs(args...).
		WithEnv(env...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(HTTPPort),
			corev1ac.ContainerPort().WithName("kv-events").WithContainerPort(int32(f.KVEvents.Port)),
			corev1ac.ContainerPort().WithName("kv-replay").WithContainerPort(int32(f.KVEvents.ReplayPort))).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(f.Resources.CPU), corev1.ResourceMemory: resource.MustParse(f.Resources.Memory), gpus: tp}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(f.Resources.MemoryLimit), gpus: tp})).
		WithVolumeMounts(mounts...).
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(fleetPreStop)))).
		WithStartupProbe(probe(10, startupFailures)).
		WithReadinessProbe(probe(5, 3)).
		WithLivenessProbe(probe(10, 6)).
		WithSecurityContext(vllmSecurityContext())
	pod := corev1ac.PodSpec().
		// Service links would inject VLLM_PORT-style variables vLLM misreads.
		WithEnableServiceLinks(false).
		// The preStop, the drain, and time for the engine to exit.
		WithTerminationGracePeriodSeconds(int64(fleetPreStop + f.Rollout.DrainSeconds + 15)).
		WithNodeSelector(f.NodeSelector).
		WithContainers(container).
		WithVolumes(volumes...)
	if f.Storage.S3 != nil {
		pod = pod.WithServiceAccountName(f.ReaderServiceAccount())
	}
	for _, t := range f.Tolerations {
		pod = pod.WithTolerations(toleration(t))
	}
	if f.OnePerNode {
		pod = pod.WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(
			corev1ac.PodAffinityTerm().WithTopologyKey("kubernetes.io/hostname").WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(f.Selector())))))
	}
	tpl := corev1ac.PodTemplateSpec().WithLabels(labels)
	if f.Staging != nil {
		// In the pod template (and the model path): a new revision rolls the
		// pods one by one onto its own directory.
		tpl = tpl.WithAnnotations(map[string]string{ModelRevisionKey: f.Staging.Revision})
	}
	d := appsv1ac.Deployment(f.Name, f.Namespace).WithLabels(labels)
	if len(f.Annotations) > 0 {
		d = d.WithAnnotations(f.Annotations)
	}
	spec := appsv1ac.DeploymentSpec()
	if f.Autoscaling == nil {
		// Autoscaled, the HPA and the router own the replicas: applying
		// them would undo every scale.
		spec = spec.WithReplicas(f.Replicas)
	}
	return d.WithSpec(spec.
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(f.Selector())).
		// No spare GPUs: replace pods one by one, never surge.
		WithStrategy(appsv1ac.DeploymentStrategy().WithType("RollingUpdate").WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
			WithMaxUnavailable(intstr.FromInt(f.Rollout.MaxUnavailable)).WithMaxSurge(intstr.FromInt(f.Rollout.MaxSurge)))).
		WithProgressDeadlineSeconds(int32(f.Rollout.StartupSeconds + 600)).
		WithTemplate(tpl.WithSpec(pod)))
}

// vllmSecurityContext is Pod Security "restricted" as far as vLLM allows:
// no privilege escalation, no capabilities, the runtime's seccomp profile.
// It stops short of runAsNonRoot and a read-only root: the vllm-openai
// image runs as root with its caches (torch.compile, Triton, FlashInfer)
// under /root/.cache, which a non-root user could not write.
func vllmSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

func (f Fleet) service(labels map[string]string) any {
	return f.Baseline.service(f.BaselineName(), f.Namespace, labels, f.Selector())
}

// PodMonitorKind is the prometheus-operator type of the fleet's scrape config.
var PodMonitorKind = kube.Ref{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}

func (f Fleet) podMonitor(labels map[string]string) any {
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
		"metadata": map[string]any{"name": f.Name, "namespace": f.Namespace, "labels": labels},
		"spec": map[string]any{
			"selector":            metav1.LabelSelector{MatchLabels: f.Selector()},
			"podMetricsEndpoints": []any{map[string]any{"port": "http", "path": "/metrics", "interval": "15s"}},
		},
	}
}

// Hash is a digest of the objects: the same spec always gives the same
// value, so a plan shows when the fleet will change.
func Hash(objs []kube.Object) (string, error) {
	h := sha256.New()
	for _, o := range objs {
		b, err := o.Canonical()
		if err != nil {
			return "", err
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
