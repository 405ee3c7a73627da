package workloads

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestRouterProxyModeUnchanged: the objects of a router in proxy mode (no
// gateway) are byte for byte those its release before gateway mode
// rendered (testdata/router-proxy.golden, written then), so an upgrade of the
// provider shows existing routers no diff and rolls no pod, but for changes
// made on purpose and written in CHANGELOG.md: since then, the default
// scorers' rendezvous term (its ConfigMap and checksum), and the peer
// exchange (its config, port and NetworkPolicy; LLMD_WRITE_GOLDEN=1
// rewrites the file).
func TestRouterProxyModeUnchanged(t *testing.T) {
	r := testRouter()
	var got []byte
	for _, withMonitor := range []bool{false, true} {
		objs, err := r.Objects(withMonitor)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			b, err := o.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			got = append(append(got, b...), '\n')
		}
	}
	golden := filepath.Join("testdata", "router-proxy.golden")
	if os.Getenv("LLMD_WRITE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("proxy-mode objects changed:\n got %s\nwant %s", got, want)
	}
}

func gatewayRouter() Router {
	r := testRouter()
	r.Gateway = &RouterGateway{Pool: "router", Port: DefaultPickerPort, FailureMode: "FailClose",
		MatchLabels: map[string]string{"llmd.dev/fleet": "qwen"}}
	return r
}

// TestRouterGatewayObjects: gateway mode renders the router as the pool's
// endpoint picker: the pool over the fleet's pods names the router's
// Service and its gRPC port, the Service carries that port with GIE's
// appProtocol, the pods serve the picker only and are probed over gRPC on
// the plaintext health port, the Role reads the pool, and the config
// follows the pool instead of a selector.
func TestRouterGatewayObjects(t *testing.T) {
	r := gatewayRouter()
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	last := objs[len(objs)-1]
	if last.Kind != "InferencePool" || last.Namespace != "llmd" || last.Name != "router" {
		t.Fatalf("last object %v, want the InferencePool llmd/router", last.Ref)
	}
	spec := last.Body().Object["spec"].(map[string]any)
	want := map[string]any{
		"selector":    map[string]any{"matchLabels": map[string]any{"llmd.dev/fleet": "qwen"}},
		"targetPorts": []any{map[string]any{"number": int64(8000)}},
		"endpointPickerRef": map[string]any{"kind": "Service", "name": "router", "port": map[string]any{"number": int64(9002)},
			"failureMode": "FailClose"},
	}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("pool spec %v\nwant %v", spec, want)
	}

	var svc corev1.Service
	find(t, objs, "Service", "llmd", "router", &svc)
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "grpc-ext-proc" || svc.Spec.Ports[1].Port != 9002 ||
		svc.Spec.Ports[1].TargetPort.StrVal != "grpc-ext-proc" || svc.Spec.Ports[1].AppProtocol == nil || *svc.Spec.Ports[1].AppProtocol != "http2" {
		t.Fatalf("service ports %+v", svc.Spec.Ports)
	}

	var d appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "router", &d)
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--picker-listen :9002 --picker-health-listen :9003 --picker-only") {
		t.Fatalf("args %q", args)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p.GRPC == nil || p.GRPC.Port != PickerHealthPort || p.GRPC.Service == nil || *p.GRPC.Service != name || p.HTTPGet != nil {
			t.Fatalf("%s probe %+v", name, p)
		}
	}
	var ports []string
	for _, p := range c.Ports {
		ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.ContainerPort))
	}
	if !slices.Equal(ports, []string{"http:8000", "grpc-peers:9092", "grpc-ext-proc:9002", "grpc-health:9003"}) {
		t.Fatalf("container ports %v", ports)
	}

	var role rbacv1.Role
	find(t, objs, "Role", "llmd", "router", &role)
	if len(role.Rules) != 2 || !slices.Equal(role.Rules[1].APIGroups, []string{"inference.networking.k8s.io"}) ||
		!slices.Equal(role.Rules[1].Resources, []string{"inferencepools"}) || !slices.Equal(role.Rules[1].Verbs, []string{"get", "list", "watch"}) {
		t.Fatalf("role rules %+v", role.Rules)
	}

	cfg, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.Discovery.Kubernetes; k.InferencePool != "router" || k.Selector != "" || k.Namespace != "llmd" {
		t.Fatalf("discovery %+v", k)
	}
	if r.URL() != "" {
		t.Fatalf("gateway mode has a client URL %q", r.URL())
	}
}

// TestRouterGatewayValidate: what gateway mode cannot be is an error naming
// the attribute and the fix.
func TestRouterGatewayValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Router)
		wants string
	}{
		{"namespace", func(r *Router) { r.Namespace = "edge"; r.Target.TokenizerPath = "" }, `namespace: "edge" is not fleet.namespace "llmd"`},
		{"load balancer", func(r *Router) { r.Service.Type = "LoadBalancer"; r.Service.Internal = true }, `service.type: "LoadBalancer" in gateway mode`},
		{"api key", func(r *Router) { r.APIKeyVersion = "1" }, "authentication is the gateway's job"},
		{"failure mode", func(r *Router) { r.Gateway.FailureMode = "Open" }, `gateway.failure_mode: "Open"`},
		{"port clash", func(r *Router) { r.Gateway.Port = RouterPort }, "gateway.port: 8000 is the router's HTTP port"},
		{"health port clash", func(r *Router) { r.Gateway.Port = PickerHealthPort }, "gateway.port: 9003 is the picker's health port"},
		{"no labels", func(r *Router) { r.Gateway.MatchLabels = nil }, "fleet.selector: an InferencePool selects pods by labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gatewayRouter()
			tc.edit(&r)
			if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("got %v, want %q", err, tc.wants)
			}
		})
	}
}
