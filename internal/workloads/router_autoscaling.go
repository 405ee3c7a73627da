package workloads

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// The router's part in an autoscaled fleet (router/autoscale): it serves
// the External metrics API to the aggregation layer on MetricsAPIPort.
const (
	MetricsAPIPort = 6443
	// MetricsAPIService is the APIService of external.metrics.k8s.io
	// v1beta1: one per cluster, whichever server backs it (this router,
	// KEDA's metrics server, prometheus-adapter).
	MetricsAPIService = "v1beta1.external.metrics.k8s.io"
)

// autoscalingConfig is the router's autoscaling section: nil unless the
// fleet is autoscaled; the Deployment to scale only with scale to zero.
func (r Router) autoscalingConfig() *config.Autoscaling {
	t := r.Target
	if !t.Autoscaled {
		return nil
	}
	a := &config.Autoscaling{MetricsListen: fmt.Sprintf(":%d", MetricsAPIPort)}
	if t.ScaleToZeroAfter > 0 {
		a.Deployment, a.ScaleToZeroAfter = t.Deployment, config.Duration{Duration: t.ScaleToZeroAfter}
	}
	return a
}

// MetricsAPIServiceName is the Service the APIService sends the HPA's
// queries to.
func (r Router) MetricsAPIServiceName() string { return r.Name + "-metrics-api" }

// autoscalingObjects register the router's metrics API with the
// aggregation layer and let it check who calls: the Service and the
// APIService (the aggregator verifies no certificate of ours, as
// metrics-server's APIService does, since the router makes its own at
// start; the router verifies the aggregator's), system:auth-delegator for
// its SubjectAccessReviews, and the reader Role of the front proxy's CA in
// kube-system.
func (r Router) autoscalingObjects(labels map[string]string) []any {
	if !r.Target.Autoscaled {
		return nil
	}
	sa := rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(r.Name).WithNamespace(r.Namespace)
	clusterName := "llmd:" + r.Namespace + ":" + r.Name
	return []any{
		corev1ac.Service(r.MetricsAPIServiceName(), r.Namespace).WithLabels(labels).WithSpec(corev1ac.ServiceSpec().
			WithType("ClusterIP").WithSelector(r.Selector()).
			WithPorts(corev1ac.ServicePort().WithName("metrics-api").WithPort(443).WithTargetPort(intstr.FromString("metrics-api")))),
		rbacv1ac.ClusterRoleBinding(clusterName + ":auth-delegator").WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName("system:auth-delegator")).
			WithSubjects(sa),
		rbacv1ac.RoleBinding(clusterName+":auth-reader", "kube-system").WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName("extension-apiserver-authentication-reader")).
			WithSubjects(sa),
		map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": MetricsAPIService, "labels": labels},
			"spec": map[string]any{"group": "external.metrics.k8s.io", "version": "v1beta1",
				"service":               map[string]any{"namespace": r.Namespace, "name": r.MetricsAPIServiceName(), "port": int64(443)},
				"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(100), "versionPriority": int64(100)},
		},
	}
}

// scaleRule lets the router scale the fleet's Deployment, and nothing
// else, from and to zero.
func (r Router) scaleRule() *rbacv1ac.PolicyRuleApplyConfiguration {
	if !r.Target.Autoscaled || r.Target.ScaleToZeroAfter <= 0 {
		return nil
	}
	return rbacv1ac.PolicyRule().WithAPIGroups("apps").WithResources("deployments/scale").
		WithResourceNames(r.Target.Deployment).WithVerbs("get", "update")
}
