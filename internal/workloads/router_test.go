package workloads

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

func testRouter() Router {
	f := Fleet{Name: "qwen", Namespace: "llmd", ServedName: "Qwen/Qwen2.5-7B-Instruct", ModelPath: "Qwen2.5-7B-Instruct",
		VLLM: VLLM{BlockSize: 64}, KVEvents: KVEvents{Port: 5557, ReplayPort: 5558, Topic: "kv@{ip}:{port}@{model}"}}
	return Router{Name: "router", Namespace: "llmd", Image: "ghcr.io/llmd-dev/llmd-router:v0.1.0", Replicas: 2, Target: f.Target(),
		Scorers:  config.DefaultScorers(),
		Limits:   RouterLimits{MaxInFlightPerPod: 64, MaxPendingPerPod: 2, MaxQueue: 1024, QueueTimeout: 30 * time.Second, Drain: 2 * time.Minute},
		LogLevel: "info", Service: Exposure{Type: "ClusterIP", Port: 8000},
		Resources:    RouterResources{CPU: "1", Memory: "1Gi", MemoryLimit: "2Gi"},
		NodeSelector: map[string]string{"llmd.dev/pool": "system"}}
}

func find(t *testing.T, objs []kube.Object, kind, ns, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Namespace == ns && o.Name == name {
			if err := o.Into(into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s %s/%s in %v", kind, ns, name, kube.Refs(objs))
}

// TestRouterObjects checks what the router's pods are allowed and told: the
// Role reads pods in the fleet's namespace only, the config file is the
// router's own format for this fleet, and the pod is "restricted".
func TestRouterObjects(t *testing.T) {
	r := testRouter()
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind+" "+o.Namespace+"/"+o.Name)
	}
	want := []string{"Namespace /llmd", "ServiceAccount llmd/router", "Role llmd/router", "RoleBinding llmd/router",
		"ConfigMap llmd/router", "Deployment llmd/router", "Service llmd/router", "PodDisruptionBudget llmd/router", "NetworkPolicy llmd/router-peers"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("objects %q, want %q", kinds, want)
	}

	var role rbacv1.Role
	find(t, objs, "Role", "llmd", "router", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, []string{""}) || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("role rules %+v, want get/list/watch on pods only", role.Rules)
	}
	var rb rbacv1.RoleBinding
	find(t, objs, "RoleBinding", "llmd", "router", &rb)
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "router" || rb.Subjects[0].Namespace != "llmd" {
		t.Errorf("role binding subjects %+v", rb.Subjects)
	}

	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "llmd", "router", &cm)
	cfg, err := config.Parse([]byte(cm.Data[RouterConfigFile]))
	if err != nil {
		t.Fatalf("the ConfigMap's file does not load as the router loads it: %v\n%s", err, cm.Data[RouterConfigFile])
	}
	if k := cfg.Discovery.Kubernetes; k == nil || k.Namespace != "llmd" || k.Selector != "app.kubernetes.io/component=decode,llmd.dev/fleet=qwen" {
		t.Errorf("discovery %+v", cfg.Discovery)
	}
	if cfg.BlockSize != 64 || cfg.Model != "Qwen/Qwen2.5-7B-Instruct" || cfg.Discovery.Ports != (config.Ports{HTTP: 8000, KVEvents: 5557, Replay: 5558}) ||
		cfg.Discovery.Topic != "kv@{ip}:{port}@{model}" {
		t.Errorf("config %+v does not follow the fleet", cfg)
	}
	if cfg.Tokenizer.JSON != "/models/Qwen2.5-7B-Instruct/tokenizer.json" || cfg.Tokenizer.Config != "/models/Qwen2.5-7B-Instruct/tokenizer_config.json" {
		t.Errorf("tokenizer %+v", cfg.Tokenizer)
	}

	var dep appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "router", &dep)
	_, sum, err := r.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations[ConfigChecksumKey]; got != sum {
		t.Errorf("pod template checksum %q, want %q", got, sum)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context %+v is not restricted", sc)
	}
	if pod.ServiceAccountName != "router" || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("the pod does not run as the router's ServiceAccount with its token mounted")
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("probes or preStop: %+v %+v %+v", c.ReadinessProbe, c.LivenessProbe, c.Lifecycle)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	// 90% of the 2Gi limit: the runtime collects harder before the kernel's OOM kill.
	if env["GOGC"] != "400" || env["GOMEMLIMIT"] != "1932735276" {
		t.Errorf("runtime env %v, want GOGC 400 and GOMEMLIMIT 1932735276", env)
	}
	if *pod.TerminationGracePeriodSeconds < int64(r.Limits.Drain.Seconds()) {
		t.Errorf("grace period %d is shorter than the drain %s", *pod.TerminationGracePeriodSeconds, r.Limits.Drain)
	}
	var claim *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim
		}
	}
	if claim == nil || claim.ClaimName != "qwen-weights" || !claim.ReadOnly {
		t.Errorf("weights claim %+v, want qwen-weights read-only", claim)
	}
	if pod.NodeSelector["llmd.dev/pool"] != "system" || len(pod.TopologySpreadConstraints) == 0 ||
		pod.TopologySpreadConstraints[0].TopologyKey != corev1.LabelHostname {
		t.Errorf("placement: %v %+v", pod.NodeSelector, pod.TopologySpreadConstraints)
	}
	if !slices.Contains(c.Args, "--max-in-flight-per-pod") || flagAfter(c.Args, "--config") != "/etc/llmd-router/router.yaml" {
		t.Errorf("args %q", c.Args)
	}
}

func flagAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestRouterConfigChangeRollsPods: a scoring change changes the checksum on
// the pod template (a rollout); a replica change does not.
func TestRouterConfigChangeRollsPods(t *testing.T) {
	checksum := func(r Router) string {
		objs, err := r.Objects(false)
		if err != nil {
			t.Fatal(err)
		}
		var dep appsv1.Deployment
		find(t, objs, "Deployment", r.Namespace, r.Name, &dep)
		return dep.Spec.Template.Annotations[ConfigChecksumKey]
	}
	base := testRouter()
	scaled := testRouter()
	scaled.Replicas = 3
	rescored := testRouter()
	rescored.Scorers = []config.Scorer{{Type: "prefix", Weight: 1}, {Type: "queue", Weight: 1}}
	if checksum(base) != checksum(scaled) {
		t.Error("a replica change changes the config checksum")
	}
	if checksum(base) == checksum(rescored) {
		t.Error("a scoring change leaves the config checksum as it was")
	}
}

// TestRouterServiceLoadBalancer: annotations and source ranges reach the Service.
func TestRouterServiceLoadBalancer(t *testing.T) {
	r := testRouter()
	r.Service = Exposure{Type: "LoadBalancer", Port: 80, Internal: true, SourceRanges: []string{"10.0.0.0/8", "192.168.0.0/16"},
		Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}}
	objs, err := r.Objects(true)
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	find(t, objs, "Service", "llmd", "router", &svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 80 ||
		!slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"10.0.0.0/8", "192.168.0.0/16"}) ||
		svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] != "internal" {
		t.Errorf("service %+v %v", svc.Spec, svc.Annotations)
	}
	if last := objs[len(objs)-1]; last.Kind != "ServiceMonitor" {
		t.Errorf("with monitoring the last object is %s, want the ServiceMonitor", last.Kind)
	}
}

// TestRouterValidateNamesTheAttribute: bad input is refused with the key at fault.
func TestRouterValidateNamesTheAttribute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Router)
		want   string
	}{
		{"unknown scorer", func(r *Router) { r.Scorers = []config.Scorer{{Type: "prefx", Weight: 1}} }, "scoring.scorers[0].type: unknown scorer"},
		{"duplicate scorer", func(r *Router) { r.Scorers = []config.Scorer{{Type: "queue", Weight: 1}, {Type: "queue", Weight: 2}} }, "scoring.scorers[1].type"},
		{"negative weight", func(r *Router) { r.Scorers = []config.Scorer{{Type: "queue", Weight: -1}} }, "scoring.scorers[0].weight"},
		{"source ranges without LB", func(r *Router) { r.Service.SourceRanges = []string{"10.0.0.0/8"} }, "service.load_balancer_source_ranges"},
		{"bad quantity", func(r *Router) { r.Resources.Memory = "lots" }, "resources.memory"},
		{"no image", func(r *Router) { r.Image = "" }, "image"},
		{"claim in another namespace", func(r *Router) { r.Namespace = "edge" }, `namespace: "edge" is not fleet.namespace "llmd"`},
		{"tokenizer without claim", func(r *Router) { r.Target.ClaimName = "" }, "fleet.claim_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRouter()
			tc.change(&r)
			err := r.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to name %q", err, tc.want)
			}
		})
	}
}
