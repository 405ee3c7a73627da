package workloads

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// alertRules are llmd's alerts in Prometheus's rule file format: the fleet's
// pods, its KV cache, the staging Job and the router.
//
//go:embed alerts/llmd.rules.yaml
var alertRules []byte

// PrometheusRuleKind is the prometheus-operator type that carries the alerts.
var PrometheusRuleKind = kube.Ref{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}

// AlertsName names the PrometheusRule in the monitoring namespace.
const AlertsName = "llmd-alerts"

// RuleGroup is one group of a Prometheus rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// AlertRuleGroups are the embedded alert groups, decoded strictly (an
// unknown field is a typo that Prometheus would reject).
func AlertRuleGroups() ([]RuleGroup, error) {
	var f struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(alertRules, &f); err != nil {
		return nil, fmt.Errorf("decoding the embedded alert rules: %w", err)
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("the embedded alert rules hold no group")
	}
	return f.Groups, nil
}

// AlertsPrometheusRule is the alerts as a PrometheusRule in the monitoring
// namespace. kube-prometheus-stack's Prometheus selects it as llmd
// installs the chart (every rule in every namespace, see
// addons.Monitoring.Values); the chart's Alertmanager routes what fires.
func AlertsPrometheusRule(namespace string) (kube.Object, error) {
	if namespace == "" {
		return kube.Object{}, fmt.Errorf("addons.monitoring.namespace: must be set")
	}
	groups, err := AlertRuleGroups()
	if err != nil {
		return kube.Object{}, err
	}
	return kube.FromApplyConfiguration(map[string]any{
		"apiVersion": PrometheusRuleKind.Group + "/" + PrometheusRuleKind.Version, "kind": PrometheusRuleKind.Kind,
		"metadata": map[string]any{"name": AlertsName, "namespace": namespace, "labels": map[string]string{
			"app.kubernetes.io/component": "alerts", "app.kubernetes.io/part-of": "llmd", "app.kubernetes.io/managed-by": "llmd"}},
		"spec": map[string]any{"groups": groups},
	})
}
