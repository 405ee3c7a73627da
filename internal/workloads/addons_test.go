package workloads

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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

// grafanaDashboard is the part of Grafana's dashboard model the test reads.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// vllmMetrics are the series vLLM exports that dashboards and alerts may
// use, read from testdata/vllm-metrics.txt (taken from vLLM's source; see
// its header).
func vllmMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vllm-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

var metricName = regexp.MustCompile(`(vllm:[a-z_]+|llmd_router_[a-z_]+)`)

// routerMetricNames are the names the router's collectors declare, read
// from router/'s sources, so a renamed series fails here and not on a
// blank Grafana panel.
func routerMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	declared := regexp.MustCompile(`"(llmd_router_[a-z_]+)"`)
	err := filepath.WalkDir(filepath.Join("..", "..", "router"), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range declared.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("found only %d router metric names under router/", len(names))
	}
	return names
}

func TestDashboardsQueryRealMetrics(t *testing.T) {
	router := routerMetricNames(t)
	exported := vllmMetrics(t)
	ds, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Name != "router" || ds[1].Name != "vllm" {
		t.Fatalf("dashboards %v, want router and vllm", ds)
	}
	wantUsed := map[string][]string{"vllm": {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"},
		"router": {"llmd_router_decisions_total", "llmd_router_prefix_blocks_matched_ratio", "llmd_router_upstream_first_byte_seconds", "llmd_router_pod_in_flight"}}
	for _, d := range ds {
		var g grafanaDashboard
		if err := json.Unmarshal(d.JSON, &g); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if g.UID == "" || g.Title == "" || len(g.Panels) == 0 || len(g.Templating.List) == 0 || g.Templating.List[0].Name != "datasource" {
			t.Fatalf("%s: uid %q title %q, %d panels, variables %+v", d.Name, g.UID, g.Title, len(g.Panels), g.Templating.List)
		}
		used := map[string]bool{}
		ids := map[int]bool{}
		for _, p := range g.Panels {
			if ids[p.ID] || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s panel %d %q: duplicate id, datasource %q or no targets", d.Name, p.ID, p.Title, p.Datasource.UID)
			}
			ids[p.ID] = true
			for _, tg := range p.Targets {
				for _, m := range metricName.FindAllString(tg.Expr, -1) {
					base := m
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						base = strings.TrimSuffix(base, suffix)
					}
					used[base] = true
					switch {
					case strings.HasPrefix(base, "vllm:") && !slices.Contains(exported, base):
						t.Errorf("%s panel %q queries %s, which vLLM does not expose", d.Name, p.Title, m)
					case strings.HasPrefix(base, "llmd_router_") && !router[base]:
						t.Errorf("%s panel %q queries %s, which no router collector declares", d.Name, p.Title, m)
					}
				}
			}
		}
		for _, m := range wantUsed[d.Name] {
			if !used[m] {
				t.Errorf("%s: no panel shows %s", d.Name, m)
			}
		}
	}
}

func TestDashboardConfigMaps(t *testing.T) {
	objs, err := DashboardConfigMaps("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "monitoring", "llmd-dashboard-vllm", &cm)
	if cm.Labels[DashboardLabel] != "1" || !json.Valid([]byte(cm.Data["vllm.json"])) {
		t.Errorf("ConfigMap labels %v, keys %v", cm.Labels, cm.Data)
	}
	find(t, objs, "ConfigMap", "monitoring", "llmd-dashboard-router", &cm)
	if _, err := DashboardConfigMaps(""); err == nil || !strings.Contains(err.Error(), "addons.monitoring.namespace") {
		t.Errorf("empty namespace: %v", err)
	}
}
