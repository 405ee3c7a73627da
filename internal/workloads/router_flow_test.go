package workloads

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const acmeDigest = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"

// TestRouterFlow: classes, default class, tenant share, the KV bound, API
// keys and the engines' priority scheduling become serve's flags and a keys file beside the configuration, whose digests
// (lower-cased, never a key) roll the pods when they change.
func TestRouterFlow(t *testing.T) {
	r := testRouter()
	_, plain, err := r.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if args := r.Args(); slices.Contains(args, "--priority-classes") || slices.Contains(args, "--api-keys-file") ||
		slices.Contains(args, "--engine-priority") || slices.Contains(args, "--kv-output-reserve") ||
		slices.Contains(args, "--max-pending-prefill-per-pod") || slices.Contains(args, "--prefill-reserve") {
		t.Errorf("a router without flow settings passes %q", args)
	}
	r.Limits.PrefillReserve = 0.25 // the provider's default, with the prefill bound turned off: moot, not passed
	if args := r.Args(); slices.Contains(args, "--prefill-reserve") {
		t.Errorf("a reserve without the prefill bound passes %q", args)
	}
	r.Target.SchedulingPolicy = PolicyPriority // engines that order by priority get the class as it
	if args := r.Args(); !slices.Contains(args, "--engine-priority") {
		t.Errorf("a router in front of priority-scheduled engines passes %q, want --engine-priority", args)
	}
	r.Limits.Classes = []RouterClass{{Name: "gold", TTL: time.Minute}, {Name: "standard"}, {Name: "batch", TTL: 10 * time.Second}}
	r.Limits.DefaultClass, r.Limits.TenantShare = "standard", 0.25
	r.Limits.KVOutputReserve, r.Limits.KVHeadroom = 1024, 0.15
	r.Limits.MaxPendingPrefillPerPod, r.Limits.PrefillReserve = 2048, 0.25
	r.APIKeys = []RouterAPIKey{{SHA256: acmeDigest, Tenant: "acme", Class: "standard"}, {SHA256: strings.Repeat("ab", 32)}}
	args := strings.Join(r.Args(), " ")
	for _, want := range []string{"--priority-classes gold=1m0s,standard,batch=10s", "--default-class standard", "--tenant-share 0.25",
		"--kv-output-reserve 1024 --kv-headroom 0.15", "--max-pending-prefill-per-pod 2048 --prefill-reserve 0.25", "--api-keys-file /etc/llmd-router/api-keys"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "llmd", "router", &cm)
	want := strings.ToLower(acmeDigest) + " tenant=acme class=standard\n" + strings.Repeat("ab", 32) + "\n"
	if cm.Data[RouterAPIKeysFile] != want {
		t.Errorf("keys file %q, want %q", cm.Data[RouterAPIKeysFile], want)
	}
	_, keyed, _ := r.ConfigFile()
	r.APIKeys[1].Class = "batch"
	_, reclassed, _ := r.ConfigFile()
	if keyed == plain || reclassed == keyed {
		t.Errorf("checksums %s, %s, %s: a key change must roll the pods", plain, keyed, reclassed)
	}
}

// TestRouterFlowErrors: each mistake names its attribute.
func TestRouterFlowErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Router)
		want string
	}{
		{"class name", func(r *Router) { r.Limits.Classes = []RouterClass{{Name: "gold tier"}} }, `limits.priority_classes[0].name: "gold tier"`},
		{"class twice", func(r *Router) { r.Limits.Classes = []RouterClass{{Name: "a"}, {Name: "a"}} }, `limits.priority_classes[1].name: "a" is named twice`},
		{"default class", func(r *Router) { r.Limits.DefaultClass = "gold" }, `limits.default_class: "gold" is not one of the classes high, standard, low`},
		{"share", func(r *Router) { r.Limits.TenantShare = 1.5 }, "limits.tenant_share: 1.5"},
		{"headroom", func(r *Router) { r.Limits.KVHeadroom = 1 }, "limits.kv_headroom: 1 is not in (0, 1)"},
		{"reserve", func(r *Router) { r.Limits.KVOutputReserve = -1 }, "limits.kv_output_reserve: -1 is negative"},
		{"prefill", func(r *Router) { r.Limits.MaxPendingPrefillPerPod = -1 }, "limits.max_pending_prefill_per_pod: -1 is negative"},
		{"prefill reserve", func(r *Router) { r.Limits.MaxPendingPrefillPerPod, r.Limits.PrefillReserve = 2048, 1 }, "limits.prefill_reserve: 1 is not a share of the pods in [0, 1)"},
		{"digest", func(r *Router) { r.APIKeys = []RouterAPIKey{{SHA256: "secret"}} }, `api_keys[0].sha256: "secret" is not 64 hex digits`},
		{"same key", func(r *Router) {
			r.APIKeys = []RouterAPIKey{{SHA256: acmeDigest}, {SHA256: strings.ToLower(acmeDigest)}}
		}, "api_keys[1].sha256: the same key"},
		{"key class", func(r *Router) {
			r.Limits.Classes = []RouterClass{{Name: "gold"}, {Name: "bronze"}}
			r.APIKeys = []RouterAPIKey{{SHA256: acmeDigest, Class: "standard"}}
		}, `api_keys[0].class: "standard" is not one of the classes gold, bronze`},
		{"gateway", func(r *Router) {
			r.Gateway = &RouterGateway{Pool: "router", Port: DefaultPickerPort, FailureMode: "FailClose", MatchLabels: map[string]string{"a": "b"}}
			r.APIKeys = []RouterAPIKey{{SHA256: acmeDigest}}
		}, "api_keys: in gateway mode"},
	} {
		r := testRouter()
		tc.edit(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRouterInternetFacingWithKeys: api_keys guard an internet-facing load
// balancer as api_key does.
func TestRouterInternetFacingWithKeys(t *testing.T) {
	r := testRouter()
	r.Service = Exposure{Type: "LoadBalancer", Port: 8000}
	if err := r.Validate(); err == nil {
		t.Fatal("an internet-facing router without a key or source ranges is accepted")
	}
	r.APIKeys = []RouterAPIKey{{SHA256: acmeDigest}}
	if err := r.Validate(); err != nil {
		t.Errorf("with api_keys: %v", err)
	}
}

// TestFleetSchedulingPolicy: the fleet passes vLLM's scheduling policy
// only when set, reports it to its router, keeps extra_args from setting
// it around the attribute, and names the attribute for a bad value.
func TestFleetSchedulingPolicy(t *testing.T) {
	f := testFleet()
	args, err := f.Args()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(args, "--scheduling-policy") || f.Target().SchedulingPolicy != "" {
		t.Errorf("a fleet without a policy passes %q, target %q", args, f.Target().SchedulingPolicy)
	}
	f.VLLM.SchedulingPolicy = PolicyPriority
	if args, err = f.Args(); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(args, "--scheduling-policy"); i < 0 || args[i+1] != "priority" || f.Target().SchedulingPolicy != PolicyPriority {
		t.Errorf("a priority fleet passes %q, target %q", args, f.Target().SchedulingPolicy)
	}
	f.VLLM.SchedulingPolicy = "lifo"
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), `vllm.scheduling_policy: "lifo"`) {
		t.Errorf("policy lifo: %v", err)
	}
	f.VLLM.SchedulingPolicy = ""
	f.VLLM.ExtraArgs = []string{"--scheduling-policy=priority"}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "scheduling_policy") {
		t.Errorf("extra_args --scheduling-policy: %v", err)
	}
}
