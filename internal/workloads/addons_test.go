package workloads

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestDevicePluginDaemonSet(t *testing.T) {
	d := DevicePlugin{Image: DefaultDevicePluginImage,
		NodeSelector: map[string]string{"llmd.dev/pool": "gpu", "nvidia.com/gpu.present": "true"},
		Tolerations: []corev1.Toleration{
			{Key: "nvidia.com/gpu", Value: "true", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule},
			{Key: "nvidia.com/gpu", Value: "other", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Value: "llm", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute},
		}}
	objs, err := d.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", DevicePluginNamespace, DevicePluginName, &ds)
	pod := ds.Spec.Template.Spec
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priority class %q", pod.PriorityClassName)
	}
	if len(pod.NodeSelector) != 2 || pod.NodeSelector["nvidia.com/gpu.present"] != "true" || pod.NodeSelector["llmd.dev/pool"] != "gpu" {
		t.Errorf("node selector %v, want the GPU node group's labels", pod.NodeSelector)
	}
	if pod.Affinity != nil {
		t.Errorf("affinity %+v: the plugin must not depend on Node Feature Discovery labels", pod.Affinity)
	}
	want := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if !slices.Equal(pod.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v", pod.Tolerations, want)
	}
	c := pod.Containers[0]
	if c.Image != DefaultDevicePluginImage || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container %s with resources %+v", c.Image, c.Resources)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].HostPath == nil || pod.Volumes[0].HostPath.Path != "/var/lib/kubelet/device-plugins" ||
		c.VolumeMounts[0].MountPath != "/var/lib/kubelet/device-plugins" {
		t.Errorf("volumes %+v mounts %+v, want the kubelet's device-plugins directory", pod.Volumes, c.VolumeMounts)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged != nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("security context %+v", c.SecurityContext)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %v does not select the template's labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
		}
	}
}

func TestDevicePluginValidateNamesTheAttribute(t *testing.T) {
	for _, tc := range []struct {
		d    DevicePlugin
		want string
	}{
		{DevicePlugin{NodeSelector: map[string]string{"a": "b"}}, "addons.nvidia_device_plugin.image"},
		{DevicePlugin{Image: DefaultDevicePluginImage}, "gpu_node_group.labels"},
	} {
		if _, err := tc.d.Objects(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.d, err, tc.want)
		}
	}
}
