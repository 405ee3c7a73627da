package workloads

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// DefaultDevicePluginImage is the NVIDIA device plugin release the provider
// pins: v0.20.0, the image NVIDIA's own static manifest of that tag runs
// (NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml at
// tag v0.20.0), pinned by the digest of its multi-platform index as public
// records state it (a kubelet's Image ID for a pod of that tag, and the
// Docker-Content-Digest nvcr.io answered for the tag, both in public
// repositories; NVIDIA's release notes state no digest).
const DefaultDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312"

// The device plugin runs where the kubelet looks for device plugins, as
// the cluster's own add-ons do.
const (
	DevicePluginName      = "nvidia-device-plugin"
	DevicePluginNamespace = "kube-system"
	deviceSocketDir       = "/var/lib/kubelet/device-plugins"
)

// DevicePlugin is the NVIDIA device plugin DaemonSet, which advertises each
// GPU node's nvidia.com/gpu to the kubelet. The AL2023 NVIDIA AMI carries the
// driver and container toolkit but not the plugin, and it is not an EKS
// add-on: without it GPU pods stay Pending. It is scheduled by the GPU node
// group's own labels, never by the upstream chart's default affinity, which
// wants Node Feature Discovery's PCI labels.
type DevicePlugin struct {
	Image string
	// NodeSelector is the GPU node group's labels: the plugin runs on every
	// GPU node and nowhere else.
	NodeSelector map[string]string
	// Tolerations are the GPU node group's taints.
	Tolerations []corev1.Toleration
}

// Labels are on the DaemonSet and its pods; the selector is a stable subset.
func (d DevicePlugin) Labels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       DevicePluginName,
		"app.kubernetes.io/component":  "device-plugin",
		"app.kubernetes.io/part-of":    "llmd",
		"app.kubernetes.io/managed-by": "llmd",
		"llmd.dev/addon":               DevicePluginName,
	}
}

// Selector picks the plugin's pods.
func (d DevicePlugin) Selector() map[string]string {
	return map[string]string{"llmd.dev/addon": DevicePluginName}
}

// Validate checks the spec, naming the Terraform attribute at fault.
func (d DevicePlugin) Validate() error {
	if d.Image == "" {
		return fmt.Errorf("addons.nvidia_device_plugin.image: must be set (default %s)", DefaultDevicePluginImage)
	}
	if len(d.NodeSelector) == 0 {
		return fmt.Errorf("gpu_node_group.labels: the device plugin is scheduled by the GPU node group's labels; without any it would run on every node")
	}
	return nil
}

// Objects is the DaemonSet, ready to apply.
func (d DevicePlugin) Objects() ([]kube.Object, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	labels := d.Labels()
	container := corev1ac.Container().WithName("nvidia-device-plugin").WithImage(d.Image).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})).
		// It only talks to the kubelet's socket and the driver: no privilege needed.
		WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("device-plugins").WithMountPath(deviceSocketDir))
	pod := corev1ac.PodSpec().
		// Evicting it takes the node's GPUs out of scheduling.
		WithPriorityClassName("system-node-critical").
		WithNodeSelector(d.NodeSelector).
		WithContainers(container).
		WithVolumes(corev1ac.Volume().WithName("device-plugins").
			WithHostPath(corev1ac.HostPathVolumeSource().WithPath(deviceSocketDir).WithType(corev1.HostPathDirectory)))
	for _, t := range d.tolerations() {
		tol := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithEffect(t.Effect)
		if t.Value != "" {
			tol = tol.WithValue(t.Value)
		}
		pod = pod.WithTolerations(tol)
	}
	ds := appsv1ac.DaemonSet(DevicePluginName, DevicePluginNamespace).WithLabels(labels).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(d.Selector())).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().WithType("RollingUpdate").
				WithRollingUpdate(appsv1ac.RollingUpdateDaemonSet().WithMaxUnavailable(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(pod)))
	o, err := kube.FromApplyConfiguration(ds)
	if err != nil {
		return nil, err
	}
	return []kube.Object{o}, nil
}

// tolerations tolerate each taint by key and effect whatever its value, in
// a stable order: a node tainted nvidia.com/gpu=present still gets its plugin.
func (d DevicePlugin) tolerations() []corev1.Toleration {
	seen := map[string]bool{}
	var out []corev1.Toleration
	for _, t := range d.Tolerations {
		k := t.Key + "\x00" + string(t.Effect)
		if seen[k] {
			continue
		}
		seen[k] = true
		op := corev1.TolerationOpExists
		if t.Key == "" {
			op = t.Operator
		}
		out = append(out, corev1.Toleration{Key: t.Key, Operator: op, Effect: t.Effect})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Effect < out[j].Effect
	})
	return out
}
