// Package autoscale is the router's part in its fleet's autoscaling: it
// tells the fleet's HorizontalPodAutoscaler the demand the router counts
// exactly, and it does what the HPA cannot, scaling the fleet from zero and
// to zero.
//
// The demand is every request the router's replicas hold on the fleet's
// pods (their in-flight counts, this replica's and its peers' as last
// exchanged) plus the requests this replica holds for a pod (its queue and
// the requests waiting for the fleet to wake). It is served as an External
// metric, MetricDemand, through Kubernetes' aggregation layer: an
// APIService for external.metrics.k8s.io/v1beta1 sends the HPA's queries to
// the router's MetricsAPI, which authenticates the API server's front proxy
// (its client certificate against the requestheader CA that
// kube-system/extension-apiserver-authentication publishes) and asks the API
// server whether the caller it names may read the metric
// (SubjectAccessReview), as every aggregated API server does. The HPA
// divides it by its target per pod: desired replicas = ceil(demand /
// target), within its tolerance and behaviour.
//
// The HPA does nothing to a workload at zero replicas and cannot go below
// one without an alpha feature gate, so the Scaler takes the fleet from
// zero to one replica when a request finds no pod (the proxy holds the
// request meanwhile, up to its class's time-to-live), and to zero after a
// set time with no demand, as KEDA's operator does for the HPA it drives.
package autoscale
