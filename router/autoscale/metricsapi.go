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
	// MetricWork is the work the router places on its fleet, tokens per
	// second over the last minute, every replica's: each placed request's
	// prompt tokens uncached on its pod plus the tokens it may generate
	// (proxy.Server.Work).
	MetricWork = "llmd-router-work"
)

// MetricsAPIConfig configures a MetricsAPI.
type MetricsAPIConfig struct {
	// Namespace and Labels are the fleet's: a query must be in Namespace
	// and its selector must match Labels (the HPA names the fleet this way).
	Namespace string
	Labels    labels.Set
	// Demand and Work are the metrics' values now.
	Demand, Work func() int64
	// Auth authenticates the API server's front proxy; Allowed authorizes
	// the caller it names (Reviewer.Allowed).
	Auth    *FrontProxy
	Allowed func(ctx context.Context, c Caller, namespace, metric string) (bool, string, error)
	Log     *slog.Logger
}

// MetricsAPI serves external.metrics.k8s.io/v1beta1 with two metrics,
// MetricDemand and MetricWork, to the aggregation layer.
type MetricsAPI struct {
	cfg    MetricsAPIConfig
	mux    *http.ServeMux
	values map[string]func() int64
}

// NewMetricsAPI returns the API's handler.
func NewMetricsAPI(cfg MetricsAPIConfig) *MetricsAPI {
	m := &MetricsAPI{cfg: cfg, mux: http.NewServeMux(), values: map[string]func() int64{MetricDemand: cfg.Demand, MetricWork: cfg.Work}}
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

// discovery lists the metrics, as the aggregator's availability check and
// kubectl's discovery read them.
func (m *MetricsAPI) discovery(w http.ResponseWriter, _ *http.Request, _ Caller) {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: Group + "/" + Version}
	for _, name := range []string{MetricDemand, MetricWork} {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: name, Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}})
	}
	writeJSON(w, http.StatusOK, list)
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
	value, ok := m.values[metric]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("metric %q is not served here; the router serves %q and %q", metric, MetricDemand, MetricWork))
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
			metric, m.cfg.Labels, m.cfg.Namespace, sel, ns))
		return
	}
	writeJSON(w, http.StatusOK, &extmetrics.ExternalMetricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: Group + "/" + Version},
		Items: []extmetrics.ExternalMetricValue{{MetricName: metric, MetricLabels: m.cfg.Labels,
			Timestamp: metav1.NewTime(time.Now()), Value: *resource.NewQuantity(value(), resource.DecimalSI)}},
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
