package addons

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Monitoring's fields; a zero field takes its default.
const (
	DefaultNamespace  = "monitoring"
	DefaultRelease    = "kube-prometheus-stack"
	DefaultRepository = "https://prometheus-community.github.io/helm-charts"
	DefaultChart      = "kube-prometheus-stack"
	// DefaultChartVersion is a recent kube-prometheus-stack release
	// (91.2.1, September 2026: prometheus-community/helm-charts tag
	// kube-prometheus-stack-91.2.1). Version has no implicit default: the
	// caller pins it, so a provider upgrade never moves the chart silently.
	DefaultChartVersion   = "91.2.1"
	DefaultDashboardLabel = "grafana_dashboard"
	DefaultTimeout        = 10 * time.Minute
)

// DashboardLabelValue is the value the Grafana sidecar expects on
// DashboardLabel: a ConfigMap labelled DashboardLabel=DashboardLabelValue, in
// any namespace, holding dashboard JSON, is loaded into Grafana.
const DashboardLabelValue = "1"

// Grafana admin Secret keys: the Secret GrafanaAdminSecret names holds the
// admin user name and password under these keys.
const (
	GrafanaAdminUserKey     = "admin-user"
	GrafanaAdminPasswordKey = "admin-password"
)

// Monitoring is the desired kube-prometheus-stack release.
type Monitoring struct {
	// Namespace of the release (default "monitoring"). It must exist: it holds GrafanaAdminSecret.
	Namespace string
	// Release is the Helm release name (default "kube-prometheus-stack").
	Release string
	// Repository is the chart repository: https://... (or http://) serving
	// index.yaml, or oci://registry/path; default DefaultRepository. A private
	// mirror of the public repository goes here.
	Repository string
	// Chart is the chart's name in Repository (default "kube-prometheus-stack").
	Chart string
	// Version is the exact chart version (required; see DefaultChartVersion).
	Version string
	// NodeSelector places Prometheus, Alertmanager, Grafana, the operator (and
	// its admission-webhook jobs) and kube-state-metrics, e.g. on the system
	// node group. The node exporter is a DaemonSet and stays on every node.
	NodeSelector map[string]string
	// Tolerations go with NodeSelector to the same components.
	Tolerations []corev1.Toleration
	// Retention is Prometheus' retention ("15d"); empty keeps the chart's default.
	Retention string
	// StorageGiB is Prometheus' volume: 0 = emptyDir (lost with the pod);
	// >0 = a PersistentVolumeClaim of that size.
	StorageGiB int64
	// StorageClass of that claim; empty = the cluster's default StorageClass.
	// EKS clusters from 1.30 on have no default class: pass the class the EBS
	// CSI driver serves (e.g. "gp3").
	StorageClass string
	// GrafanaAdminSecret names an existing Secret in Namespace with keys
	// admin-user and admin-password. The caller writes it, so the password
	// never enters Helm values, the release secrets or Terraform state.
	GrafanaAdminSecret string
	// DashboardLabel is the label the Grafana sidecar watches (default
	// "grafana_dashboard", value DashboardLabelValue), in all namespaces.
	DashboardLabel string
	// Timeout bounds one Apply or Uninstall, waits included (default 10m).
	Timeout time.Duration
}

func (m Monitoring) withDefaults() Monitoring {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&m.Namespace, DefaultNamespace)
	def(&m.Release, DefaultRelease)
	def(&m.Repository, DefaultRepository)
	def(&m.Chart, DefaultChart)
	def(&m.DashboardLabel, DefaultDashboardLabel)
	if m.Timeout == 0 {
		m.Timeout = DefaultTimeout
	}
	return m
}

// promDuration is Prometheus' duration syntax (units y w d h m s ms, largest first).
var promDuration = regexp.MustCompile(`^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$`)

// Validate checks m (after defaults) without reaching any cluster or
// repository, so a provider can call it at plan time. Each error names the
// field and the fix.
func (m Monitoring) Validate() error {
	m = m.withDefaults()
	var errs []error
	if err := validateTarget(m.Namespace, m.Release); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validateChart(m.Repository, m.Chart, m.Version, DefaultChart, DefaultChartVersion)...)
	if m.Retention != "" && (!promDuration.MatchString(m.Retention) || m.Retention == "0") {
		errs = append(errs, fmt.Errorf("Retention %q is not a Prometheus duration: use a number and unit, such as \"15d\" or \"12h\"", m.Retention))
	}
	if m.StorageGiB < 0 {
		errs = append(errs, fmt.Errorf("StorageGiB %d is negative: use 0 for an emptyDir or the volume size in GiB", m.StorageGiB))
	}
	if m.StorageClass != "" && len(validation.IsDNS1123Subdomain(m.StorageClass)) > 0 {
		errs = append(errs, fmt.Errorf("StorageClass %q is not a StorageClass name", m.StorageClass))
	}
	if m.StorageClass != "" && m.StorageGiB == 0 {
		errs = append(errs, fmt.Errorf("StorageClass %q is set but StorageGiB is 0 (an emptyDir): set StorageGiB too, or drop StorageClass", m.StorageClass))
	}
	if m.GrafanaAdminSecret == "" {
		// Without it the Grafana chart generates a password into a Secret of
		// the release manifest, i.e. into Helm's release records.
		errs = append(errs, errors.New("GrafanaAdminSecret is empty: name a Secret in the release namespace with keys admin-user and admin-password"))
	} else if len(validation.IsDNS1123Subdomain(m.GrafanaAdminSecret)) > 0 {
		errs = append(errs, fmt.Errorf("GrafanaAdminSecret %q is not a Secret name", m.GrafanaAdminSecret))
	}
	if bad := validation.IsQualifiedName(m.DashboardLabel); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("DashboardLabel %q is not a label key: %s", m.DashboardLabel, strings.Join(bad, "; ")))
	}
	for k, v := range m.NodeSelector {
		if bad := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(bad) > 0 {
			errs = append(errs, fmt.Errorf("NodeSelector %s=%s is not a label: %s", k, v, strings.Join(bad, "; ")))
		}
	}
	if m.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %s is negative", m.Timeout))
	}
	return errors.Join(errs...)
}

// validateTarget checks what Read and Uninstall need: where the release is.
func validateTarget(namespace, release string) error {
	var errs []error
	if bad := validation.IsDNS1123Label(namespace); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("Namespace %q is not a namespace name: %s", namespace, strings.Join(bad, "; ")))
	}
	if err := chartutil.ValidateReleaseName(release); err != nil {
		errs = append(errs, fmt.Errorf("Release %q is not a Helm release name (lower-case letters, digits and '-', at most 53 characters): %w", release, err))
	}
	return errors.Join(errs...)
}

// validateChart checks a pinned chart: its repository, its bare name and an
// exact version; example and exampleVersion are what the errors suggest.
func validateChart(repository, chart, version, example, exampleVersion string) []error {
	var errs []error
	if err := validateRepository(repository); err != nil {
		errs = append(errs, err)
	}
	if bad := validation.IsDNS1123Subdomain(chart); len(bad) > 0 || strings.Contains(chart, "/") {
		errs = append(errs, fmt.Errorf("Chart %q is not a chart name: give the bare name in the repository, such as %q", chart, example))
	}
	switch v, err := semver.StrictNewVersion(strings.TrimSpace(version)); {
	case version == "":
		errs = append(errs, fmt.Errorf("Version is empty: pin the exact chart version, such as %q", exampleVersion))
	case err != nil:
		errs = append(errs, fmt.Errorf("Version %q is not an exact chart version (%v): pin one such as %q, not a range", version, err, exampleVersion))
	case v.String() != version:
		errs = append(errs, fmt.Errorf("Version %q: write it as %q", version, v.String()))
	}
	return errs
}

func validateRepository(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("Repository %q is not a URL (%v): give https://host/path (a repository with index.yaml) or oci://registry/path", raw, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "oci":
		return fmt.Errorf("Repository %q: the scheme must be https, http or oci, such as %q", raw, DefaultRepository)
	case u.Host == "":
		return fmt.Errorf("Repository %q has no host: give https://host/path or oci://registry/path", raw)
	case u.User != nil:
		return fmt.Errorf("Repository %q carries credentials in the URL: they would be stored in plain text; use a mirror that needs none", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("Repository %q has a query or fragment: give the repository's base URL", raw)
	}
	return nil
}

// Values are the chart values llmd sets: Prometheus selects the
// ServiceMonitors, PodMonitors, rules, probes and scrape configs of every
// release in every namespace (the chart's default selects only its own
// release's), the Grafana sidecar loads dashboards labelled DashboardLabel
// from every namespace, Grafana's admin comes from GrafanaAdminSecret, and
// the stack's pods are placed by NodeSelector and Tolerations. The result
// is deterministic and holds no secret value (names of Secrets only).
func (m Monitoring) Values() map[string]any {
	m = m.withDefaults()
	place := func(into map[string]any) map[string]any {
		if len(m.NodeSelector) > 0 {
			sel := map[string]any{}
			for k, v := range m.NodeSelector {
				sel[k] = v
			}
			into["nodeSelector"] = sel
		}
		if len(m.Tolerations) > 0 {
			into["tolerations"] = plain(m.Tolerations)
		}
		return into
	}
	promSpec := place(map[string]any{
		"serviceMonitorSelectorNilUsesHelmValues": false,
		"podMonitorSelectorNilUsesHelmValues":     false,
		"ruleSelectorNilUsesHelmValues":           false,
		"probeSelectorNilUsesHelmValues":          false,
		"scrapeConfigSelectorNilUsesHelmValues":   false,
	})
	if m.Retention != "" {
		promSpec["retention"] = m.Retention
	}
	if m.StorageGiB > 0 {
		claim := map[string]any{
			"accessModes": []any{"ReadWriteOnce"},
			"resources":   map[string]any{"requests": map[string]any{"storage": fmt.Sprintf("%dGi", m.StorageGiB)}},
		}
		if m.StorageClass != "" {
			claim["storageClassName"] = m.StorageClass
		}
		promSpec["storageSpec"] = map[string]any{"volumeClaimTemplate": map[string]any{"spec": claim}}
	}
	return map[string]any{
		"prometheus":   map[string]any{"prometheusSpec": promSpec},
		"alertmanager": map[string]any{"alertmanagerSpec": place(map[string]any{})},
		"prometheusOperator": place(map[string]any{
			"admissionWebhooks": map[string]any{"patch": place(map[string]any{})},
		}),
		"kube-state-metrics": place(map[string]any{}),
		"grafana": place(map[string]any{
			"admin": map[string]any{
				"existingSecret": m.GrafanaAdminSecret,
				"userKey":        GrafanaAdminUserKey,
				"passwordKey":    GrafanaAdminPasswordKey,
			},
			"sidecar": map[string]any{"dashboards": map[string]any{
				"enabled":         true,
				"label":           m.DashboardLabel,
				"labelValue":      DashboardLabelValue,
				"searchNamespace": "ALL",
			}},
		}),
	}
}

func (m Monitoring) chartRelease() chartRelease {
	m = m.withDefaults()
	return chartRelease{Namespace: m.Namespace, Release: m.Release, Repository: m.Repository, Chart: m.Chart, Version: m.Version,
		Values: m.Values(), Timeout: m.Timeout, Prepare: m.checkGrafanaSecret}
}

// ValuesHash is the hash Status.ValuesHash holds for m's values: equal
// hashes mean the deployed release carries exactly the values m sets.
func (m Monitoring) ValuesHash() string { return valuesHash(m.Values()) }

// valuesHash hashes values as Helm stores them (JSON), with sorted keys.
func valuesHash(values map[string]any) string {
	raw, err := json.Marshal(normalize(values))
	if err != nil {
		// Values decoded from or built as JSON always encode.
		panic(fmt.Sprintf("addons: encoding values: %v", err))
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// plain turns a typed value into the JSON-shaped one Helm stores.
func plain(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("addons: encoding %T: %v", v, err))
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("addons: decoding %T: %v", v, err))
	}
	return out
}

// normalize gives values the shape a JSON round trip gives (what Helm
// stores and reads back), with nil as an empty map.
func normalize(values map[string]any) map[string]any {
	if values == nil {
		return map[string]any{}
	}
	out, _ := plain(values).(map[string]any)
	if out == nil {
		return map[string]any{}
	}
	return out
}
