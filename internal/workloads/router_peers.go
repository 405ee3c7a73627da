package workloads

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// PeerPort is where every router pod serves its peer replicas (package
// router/peers): the speculative entries and in-flight counts of its
// decisions, and its index for a starting replica's warm start. It is on
// the pods only, never on the Service.
const PeerPort = 9092

// peers is the router's peer configuration: the Deployment's own pods,
// found through the API server in the router's namespace.
func (r Router) peers() config.Peers {
	return config.Peers{Listen: fmt.Sprintf(":%d", PeerPort),
		Kubernetes: &config.Kubernetes{Namespace: r.Namespace, Selector: selectorString(r.Selector())}}
}

// peerRBAC lets the router list its own pods when they live outside the
// fleet's namespace (inside it, the discovery Role already reads pods).
func (r Router) peerRBAC(labels map[string]string) []any {
	if r.Namespace == r.Target.Namespace {
		return nil
	}
	name := r.Name + "-peers"
	return []any{
		rbacv1ac.Role(name, r.Namespace).WithLabels(labels).
			WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods").WithVerbs("get", "list", "watch")),
		rbacv1ac.RoleBinding(name, r.Namespace).WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(name)).
			WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(r.Name).WithNamespace(r.Namespace)),
	}
}

// peerPolicy admits the router pods' serving ports from anywhere, as
// before, and their peer port only from the router's own pods: the peer
// stream carries routing state, and nothing else needs it. Clusters whose
// CNI enforces no NetworkPolicy (the VPC CNI until its network policy agent
// is enabled) ignore it.
func (r Router) peerPolicy(labels map[string]string) any {
	var serving []*networkingv1ac.NetworkPolicyPortApplyConfiguration
	for _, p := range r.containerPorts() {
		if *p.ContainerPort != PeerPort {
			serving = append(serving, networkingv1ac.NetworkPolicyPort().WithPort(intstr.FromInt32(*p.ContainerPort)))
		}
	}
	return networkingv1ac.NetworkPolicy(r.Name+"-peers", r.Namespace).WithLabels(labels).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector())).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(
				networkingv1ac.NetworkPolicyIngressRule().WithPorts(serving...),
				networkingv1ac.NetworkPolicyIngressRule().
					WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector()))).
					WithPorts(networkingv1ac.NetworkPolicyPort().WithPort(intstr.FromInt32(PeerPort)))))
}

// peerContainerPort is the peer port on the router container.
func peerContainerPort() *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName("grpc-peers").WithContainerPort(PeerPort)
}
