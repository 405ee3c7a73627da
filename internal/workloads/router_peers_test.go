package workloads

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// TestRouterPeers checks the peer exchange as the router pods get it: the
// config names the Deployment's own pods in the router's namespace on the
// peer port, the port is on the pods but not on the Service, only router
// pods may reach it, and a router outside the fleet's namespace may list
// its own pods there.
func TestRouterPeers(t *testing.T) {
	r := testRouter()
	r.Namespace = "routers" // the fleet stays in llmd
	// A claim mounts only in its own namespace: this router routes on load.
	r.Target.TokenizerPath, r.Target.TokenizerConfigPath = "", ""
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "routers", "router", &cm)
	cfg, err := config.Parse([]byte(cm.Data[RouterConfigFile]))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Peers; p.Listen != ":9092" || p.Kubernetes == nil || p.Kubernetes.Namespace != "routers" ||
		p.Kubernetes.Selector != "app.kubernetes.io/component=router,llmd.dev/router=router" {
		t.Errorf("peers %+v (kubernetes %+v)", p, p.Kubernetes)
	}
	var svc corev1.Service
	find(t, objs, "Service", "routers", "router", &svc)
	for _, p := range svc.Spec.Ports {
		if p.Port == PeerPort {
			t.Errorf("the peer port is on the Service: %+v", svc.Spec.Ports)
		}
	}

	var np networkingv1.NetworkPolicy
	find(t, objs, "NetworkPolicy", "routers", "router-peers", &np)
	if len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[0].From) != 0 || len(np.Spec.Ingress[0].Ports) != 1 ||
		np.Spec.Ingress[0].Ports[0].Port.IntValue() != RouterPort {
		t.Fatalf("serving rule %+v: want the HTTP port open to all", np.Spec.Ingress)
	}
	peers := np.Spec.Ingress[1]
	if len(peers.Ports) != 1 || peers.Ports[0].Port.IntValue() != PeerPort || len(peers.From) != 1 ||
		peers.From[0].PodSelector == nil || peers.From[0].NamespaceSelector != nil ||
		peers.From[0].PodSelector.MatchLabels["llmd.dev/router"] != "router" {
		t.Errorf("peer rule %+v: want the peer port from the router's pods only", peers)
	}

	var role rbacv1.Role
	find(t, objs, "Role", "routers", "router-peers", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("peer role %+v", role.Rules)
	}
	var rb rbacv1.RoleBinding
	find(t, objs, "RoleBinding", "routers", "router-peers", &rb)
	if rb.RoleRef.Name != "router-peers" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "router" || rb.Subjects[0].Namespace != "routers" {
		t.Errorf("peer role binding %+v", rb)
	}
}
