package workloads

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmd-dev/terraform-provider-llmd/router/autoscale"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

func autoscaledFleet(min int32) Fleet {
	f := testFleet()
	f.Autoscaling = &Autoscaling{Min: min, Max: 8, TargetPerPod: 75, ScaleDownDelay: 5 * time.Minute, ScaleToZeroAfter: 15 * time.Minute}
	return f
}

func TestMetricsAreTheRoutersNames(t *testing.T) {
	if DemandMetric != autoscale.MetricDemand || WorkMetric != autoscale.MetricWork {
		t.Fatalf("the HPA asks for %q and %q, the router serves %q and %q", DemandMetric, WorkMetric, autoscale.MetricDemand, autoscale.MetricWork)
	}
}

// TestAutoscalerMetrics: the HPA reads the router's work, its demand or
// both (the controller then takes the larger proposal), each at its
// target per pod.
func TestAutoscalerMetrics(t *testing.T) {
	for _, c := range []struct {
		demand, work int64
		want         map[string]int64
	}{
		{0, 2000, map[string]int64{WorkMetric: 2000}},
		{75, 0, map[string]int64{DemandMetric: 75}},
		{75, 2000, map[string]int64{WorkMetric: 2000, DemandMetric: 75}},
	} {
		f := autoscaledFleet(2)
		f.Autoscaling.TargetPerPod, f.Autoscaling.TargetWorkPerPod = c.demand, c.work
		objs, err := f.Objects(false)
		if err != nil {
			t.Fatal(err)
		}
		var h autoscalingv2.HorizontalPodAutoscaler
		find(t, objs, "HorizontalPodAutoscaler", f.Namespace, f.Name, &h)
		got := map[string]int64{}
		for _, m := range h.Spec.Metrics {
			if m.Type != autoscalingv2.ExternalMetricSourceType || m.External.Target.Type != autoscalingv2.AverageValueMetricType {
				t.Errorf("metric %+v: want an External metric at an average value per pod", m)
				continue
			}
			got[m.External.Metric.Name] = m.External.Target.AverageValue.Value()
		}
		if len(got) != len(c.want) || len(h.Spec.Metrics) != len(c.want) {
			t.Errorf("targets demand %d, work %d: metrics %v, want %v", c.demand, c.work, got, c.want)
		}
		for name, v := range c.want {
			if got[name] != v {
				t.Errorf("targets demand %d, work %d: metrics %v, want %v", c.demand, c.work, got, c.want)
			}
		}
	}
}

func TestAutoscaledFleetLeavesReplicasToTheHPA(t *testing.T) {
	f := autoscaledFleet(2)
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	find(t, objs, "Deployment", f.Namespace, f.Name, &d)
	if d.Spec.Replicas != nil {
		t.Errorf("an autoscaled fleet applies replicas %d, which would undo every scale", *d.Spec.Replicas)
	}
	var h autoscalingv2.HorizontalPodAutoscaler
	find(t, objs, "HorizontalPodAutoscaler", f.Namespace, f.Name, &h)
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != f.Name || *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 8 {
		t.Errorf("HPA spec %+v", h.Spec)
	}
	m := h.Spec.Metrics[0]
	if m.Type != autoscalingv2.ExternalMetricSourceType || m.External.Metric.Name != DemandMetric ||
		m.External.Target.Type != autoscalingv2.AverageValueMetricType || m.External.Target.AverageValue.Value() != 75 {
		t.Errorf("HPA metric %+v", m)
	}
	for k, v := range f.Selector() {
		if m.External.Metric.Selector.MatchLabels[k] != v {
			t.Errorf("the metric's selector %v does not name the fleet's pods %v", m.External.Metric.Selector.MatchLabels, f.Selector())
		}
	}
	if *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 300 {
		t.Errorf("scale-down window %d", *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds)
	}

	fixed := testFleet()
	objs, err = fixed.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	find(t, objs, "Deployment", fixed.Namespace, fixed.Name, &d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != fixed.Replicas {
		t.Errorf("a fixed fleet applies replicas %v, want %d", d.Spec.Replicas, fixed.Replicas)
	}
	for _, o := range objs {
		if o.Kind == "HorizontalPodAutoscaler" {
			t.Error("a fixed fleet has an HPA")
		}
	}
}

func TestFleetDrainsItsPods(t *testing.T) {
	f := testFleet()
	f.Rollout.DrainSeconds = 90
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	find(t, objs, "Deployment", f.Namespace, f.Name, &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	i := slices.Index(c.Args, "--shutdown-timeout")
	if i < 0 || c.Args[i+1] != "90" {
		t.Errorf("vLLM args %v lack --shutdown-timeout 90", c.Args)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep")
	}
	if got, want := *pod.TerminationGracePeriodSeconds, c.Lifecycle.PreStop.Sleep.Seconds+90; got <= want {
		t.Errorf("grace period %d does not cover the preStop and the drain (%d)", got, want)
	}
	f.VLLM.ExtraArgs = []string{"--shutdown-timeout=5"}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "rollout.drain_timeout") {
		t.Errorf("extra_args --shutdown-timeout: %v", err)
	}
}

func TestAutoscalingValidation(t *testing.T) {
	for _, tc := range []struct {
		change func(*Autoscaling)
		want   string
	}{
		{func(a *Autoscaling) { a.Max = 1; a.Min = 2 }, "autoscaling.max_replicas"},
		{func(a *Autoscaling) { a.TargetPerPod = 0 }, "autoscaling.target_work_per_pod or autoscaling.target_per_pod must be set"},
		{func(a *Autoscaling) { a.TargetWorkPerPod = -1 }, "autoscaling.target_work_per_pod or autoscaling.target_per_pod must be set"},
		{func(a *Autoscaling) { a.ScaleDownDelay = 2 * time.Hour }, "autoscaling.scale_down_delay"},
		{func(a *Autoscaling) { a.Min = 0; a.ScaleToZeroAfter = 0 }, "autoscaling.scale_to_zero_after"},
	} {
		f := autoscaledFleet(1)
		tc.change(f.Autoscaling)
		if err := f.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", *f.Autoscaling, err, tc.want)
		}
	}
}

func TestRouterOfAnAutoscaledFleet(t *testing.T) {
	for _, min := range []int32{0, 2} {
		r := testRouter()
		r.Target = autoscaledFleet(min).Target()
		c, err := r.Config()
		if err != nil {
			t.Fatal(err)
		}
		want := &config.Autoscaling{MetricsListen: ":6443"}
		if min == 0 {
			want.Deployment, want.ScaleToZeroAfter = "qwen", config.Duration{Duration: 15 * time.Minute}
		}
		if *c.Autoscaling != *want {
			t.Errorf("min %d: autoscaling config %+v, want %+v", min, *c.Autoscaling, *want)
		}
		objs, err := r.Objects(false)
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.Role
		find(t, objs, "Role", r.Target.Namespace, r.Name, &role)
		scales := slices.ContainsFunc(role.Rules, func(p rbacv1.PolicyRule) bool {
			return slices.Equal(p.Resources, []string{"deployments/scale"}) && slices.Equal(p.ResourceNames, []string{"qwen"}) &&
				!slices.Contains(p.Verbs, "patch") && !slices.Contains(p.Verbs, "delete")
		})
		if scales != (min == 0) {
			t.Errorf("min %d: the router may scale the fleet: %v (rules %+v)", min, scales, role.Rules)
		}
		var d appsv1.Deployment
		find(t, objs, "Deployment", r.Namespace, r.Name, &d)
		if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == MetricsAPIPort }) {
			t.Errorf("no metrics API port on the router container")
		}
		var np networkingv1.NetworkPolicy
		find(t, objs, "NetworkPolicy", r.Namespace, r.Name+"-peers", &np)
		if !slices.ContainsFunc(np.Spec.Ingress[0].Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntValue() == MetricsAPIPort }) {
			t.Errorf("the network policy shuts the API server out of the metrics API: %+v", np.Spec.Ingress)
		}
		var crb rbacv1.ClusterRoleBinding
		find(t, objs, "ClusterRoleBinding", "", "llmd:llmd:router:auth-delegator", &crb)
		if crb.RoleRef.Name != "system:auth-delegator" || crb.Subjects[0].Name != r.Name {
			t.Errorf("auth delegation %+v", crb)
		}
		var rb rbacv1.RoleBinding
		find(t, objs, "RoleBinding", "kube-system", "llmd:llmd:router:auth-reader", &rb)
		if rb.RoleRef.Name != "extension-apiserver-authentication-reader" {
			t.Errorf("front proxy CA reader %+v", rb)
		}
		var api unstructured.Unstructured
		find(t, objs, "APIService", "", MetricsAPIService, &api.Object)
		if svc, _, _ := unstructured.NestedString(api.Object, "spec", "service", "name"); svc != "router-metrics-api" {
			t.Errorf("the APIService sends queries to %q", svc)
		}
	}
}
