package autoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	extmetrics "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// The External metrics API the router serves.
const (
	Group   = "external.metrics.k8s.io"
	Version = "v1beta1"
	// MetricDemand is the router's demand on its fleet: requests in flight
	// on the fleet's pods from every replica plus the requests this replica
	// holds for a pod.
	MetricDemand = "llmd-router-demand"
)

// MetricsAPIConfig configures a MetricsAPI.
type MetricsAPIConfig struct {
	// Namespace and Labels are the fleet's: a query must be in Namespace
	// and its selector must match Labels (the HPA names the fleet this way).
	Namespace string
	Labels    labels.Set
	// Demand is the metric's value now.
	Demand func() int64
	// Auth authenticates the API server's front proxy; Allowed authorizes
	// the caller it names (Reviewer.Allowed).
	Auth    *FrontProxy
	Allowed func(ctx context.Context, c Caller, namespace, metric string) (bool, string, error)
	Log     *slog.Logger
}

// MetricsAPI serves external.metrics.k8s.io/v1beta1 with one metric,
// MetricDemand, to the aggregation layer.
type MetricsAPI struct {
	cfg MetricsAPIConfig
	mux *http.ServeMux
}

// NewMetricsAPI returns the API's handler.
func NewMetricsAPI(cfg MetricsAPIConfig) *MetricsAPI {
	m := &MetricsAPI{cfg: cfg, mux: http.NewServeMux()}
	base := "/apis/" + Group + "/" + Version
	m.mux.HandleFunc("GET "+base, m.authenticated(m.discovery))
	m.mux.HandleFunc("GET "+base+"/namespaces/{namespace}/{metric}", m.authenticated(m.value))
	m.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %s is not served by the router's metrics API", r.Method, r.URL.Path))
	})
	return m
}

// ServeHTTP implements http.Handler.
func (m *MetricsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

func (m *MetricsAPI) authenticated(h func(http.ResponseWriter, *http.Request, Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := m.cfg.Auth.Authenticate(r)
		if err != nil {
			m.cfg.Log.Warn("metrics API: refused an unauthenticated request", "remote", r.RemoteAddr, "path", r.URL.Path, "error", err)
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err.Error())
			return
		}
		h(w, r, c)
	}
}

// discovery lists the metric, as the aggregator's availability check and
// kubectl's discovery read it.
func (m *MetricsAPI) discovery(w http.ResponseWriter, _ *http.Request, _ Caller) {
	writeJSON(w, http.StatusOK, &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{{Name: MetricDemand, Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}},
	})
}

// value answers the HPA's query for the metric in a namespace with a
// label selector.
func (m *MetricsAPI) value(w http.ResponseWriter, r *http.Request, c Caller) {
	ns, metric := r.PathValue("namespace"), r.PathValue("metric")
	allowed, reason, err := m.cfg.Allowed(r.Context(), c, ns, metric)
	switch {
	case err != nil:
		m.cfg.Log.Warn("metrics API: authorization failed", "user", c.User, "error", err)
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	case !allowed:
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("%s may not get %s.%s in namespace %s: %s", c.User, metric, Group, ns, reason))
		return
	}
	if metric != MetricDemand {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("metric %q is not served here; the router serves %q", metric, MetricDemand))
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("labelSelector: %v", err))
		return
	}
	if ns != m.cfg.Namespace || !sel.Matches(m.cfg.Labels) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf(
			"this router serves %s for the fleet with labels %s in namespace %s, not for %q in %s",
			MetricDemand, m.cfg.Labels, m.cfg.Namespace, sel, ns))
		return
	}
	writeJSON(w, http.StatusOK, &extmetrics.ExternalMetricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: Group + "/" + Version},
		Items: []extmetrics.ExternalMetricValue{{MetricName: MetricDemand, MetricLabels: m.cfg.Labels,
			Timestamp: metav1.NewTime(time.Now()), Value: *resource.NewQuantity(m.cfg.Demand(), resource.DecimalSI)}},
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus answers with a Kubernetes Status, which the API server
// passes on to the HPA, whose events quote its message.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}
