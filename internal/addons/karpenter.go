package addons

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Karpenter's fields; a zero field takes its default.
const (
	DefaultKarpenterNamespace      = "kube-system"
	DefaultKarpenterRelease        = "karpenter"
	DefaultKarpenterServiceAccount = "karpenter"
	// DefaultKarpenterRepository is where Karpenter publishes its chart
	// (Karpenter's getting-started guide installs
	// oci://public.ecr.aws/karpenter/karpenter).
	DefaultKarpenterRepository = "oci://public.ecr.aws/karpenter"
	DefaultKarpenterChart      = "karpenter"
	// DefaultKarpenterVersion is the release the test ground runs for real
	// (internal/testenv KarpenterVersion). As with monitoring, Version has
	// no implicit default: the caller pins it.
	DefaultKarpenterVersion = "1.14.0"
	DefaultKarpenterTimeout = 10 * time.Minute
)

// Karpenter is the desired Karpenter release: the controller (the chart's
// Deployment, its RBAC and its CRDs) for one EKS cluster, with the AWS
// parts it uses made beforehand (its role, bound to ServiceAccount by an
// EKS Pod Identity association, and the interruption queue).
type Karpenter struct {
	// Namespace of the release (default "kube-system", where Karpenter's
	// guide installs it and where the Pod Identity association points).
	Namespace string
	// Release is the Helm release name (default "karpenter").
	Release string
	// Repository is the chart repository, https://... serving index.yaml or
	// oci://registry/path (default DefaultKarpenterRepository).
	Repository string
	// Chart is the chart's name in Repository (default "karpenter").
	Chart string
	// Version is the exact chart version (required; see DefaultKarpenterVersion).
	Version string
	// ServiceAccount is the controller's service account (default
	// "karpenter"): the name the Pod Identity association binds.
	ServiceAccount string
	// ClusterName and ClusterEndpoint name the EKS cluster (the chart's
	// settings.clusterName, required, and settings.clusterEndpoint).
	ClusterName     string
	ClusterEndpoint string
	// InterruptionQueue is the SQS queue's name that EventBridge feeds with
	// Spot interruptions, rebalance recommendations, scheduled changes and
	// instance state changes; empty leaves interruption handling off.
	InterruptionQueue string
	// Replicas of the controller (default 2): the chart keeps replicas on
	// different nodes, so more than the nodes NodeSelector matches never
	// become ready.
	Replicas int
	// NodeSelector and Tolerations place the controller, e.g. on the system
	// node group: never on a node Karpenter made, which the chart's own
	// affinity already rules out.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Timeout bounds one Apply or Uninstall, waits included (default 10m).
	Timeout time.Duration
}

func (k Karpenter) withDefaults() Karpenter {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&k.Namespace, DefaultKarpenterNamespace)
	def(&k.Release, DefaultKarpenterRelease)
	def(&k.Repository, DefaultKarpenterRepository)
	def(&k.Chart, DefaultKarpenterChart)
	def(&k.ServiceAccount, DefaultKarpenterServiceAccount)
	if k.Replicas == 0 {
		k.Replicas = 2
	}
	if k.Timeout == 0 {
		k.Timeout = DefaultKarpenterTimeout
	}
	return k
}

// Validate checks k (after defaults) without reaching any cluster or
// repository; each error names the field and the fix.
func (k Karpenter) Validate() error {
	k = k.withDefaults()
	var errs []error
	if err := validateTarget(k.Namespace, k.Release); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validateChart(k.Repository, k.Chart, k.Version, DefaultKarpenterChart, DefaultKarpenterVersion)...)
	if k.ClusterName == "" {
		errs = append(errs, errors.New("ClusterName is empty: name the EKS cluster Karpenter makes nodes for"))
	}
	if bad := validation.IsDNS1123Subdomain(k.ServiceAccount); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("ServiceAccount %q is not a service account name: %s", k.ServiceAccount, strings.Join(bad, "; ")))
	}
	if k.Replicas < 1 {
		errs = append(errs, fmt.Errorf("Replicas %d: run at least one controller", k.Replicas))
	}
	for key, v := range k.NodeSelector {
		if bad := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(v)...); len(bad) > 0 {
			errs = append(errs, fmt.Errorf("NodeSelector %s=%s is not a label: %s", key, v, strings.Join(bad, "; ")))
		}
	}
	if k.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %s is negative", k.Timeout))
	}
	return errors.Join(errs...)
}

// Values are the chart values llmd sets: the cluster, the interruption
// queue, the service account the Pod Identity association names, the
// replicas and the placement (the chart's own nodeSelector, kubernetes.io/os
// linux, is kept beside NodeSelector). Deterministic; no secret.
func (k Karpenter) Values() map[string]any {
	k = k.withDefaults()
	selector := map[string]any{"kubernetes.io/os": "linux"}
	for key, v := range k.NodeSelector {
		selector[key] = v
	}
	settings := map[string]any{"clusterName": k.ClusterName}
	if k.ClusterEndpoint != "" {
		settings["clusterEndpoint"] = k.ClusterEndpoint
	}
	if k.InterruptionQueue != "" {
		settings["interruptionQueue"] = k.InterruptionQueue
	}
	// The chart's own toleration (CriticalAddonsOnly) is kept.
	tolerations := append([]corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}, k.Tolerations...)
	return normalize(map[string]any{
		"serviceAccount": map[string]any{"create": true, "name": k.ServiceAccount},
		"settings":       settings,
		"replicas":       k.Replicas,
		"nodeSelector":   selector,
		"tolerations":    tolerations,
	})
}

func (k Karpenter) chartRelease() chartRelease {
	k = k.withDefaults()
	return chartRelease{Namespace: k.Namespace, Release: k.Release, Repository: k.Repository, Chart: k.Chart, Version: k.Version,
		Values: k.Values(), Timeout: k.Timeout}
}
