package provider

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// requireMetricsAPIFree refuses to take over the cluster's External metrics
// API from another server: the API server sends every HPA's External
// metric queries to the one Service its APIService names, so a second
// server would silently cut off the first's autoscalers.
func requireMetricsAPIFree(ctx context.Context, c *kube.Client, r workloads.Router) error {
	got, err := c.Dynamic.Resource(apiServices).Get(ctx, workloads.MetricsAPIService, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading APIService %s: %w", workloads.MetricsAPIService, err)
	}
	ns, _, _ := unstructured.NestedString(got.Object, "spec", "service", "namespace")
	name, _, _ := unstructured.NestedString(got.Object, "spec", "service", "name")
	if ns == r.Namespace && name == r.MetricsAPIServiceName() {
		return nil
	}
	owner := "no Service (the API server's own)"
	if name != "" {
		owner = "Service " + ns + "/" + name
	}
	if l := got.GetLabels()["llmd.dev/router"]; l != "" {
		owner += fmt.Sprintf(" of llmd_prefix_router %q", l)
	}
	return fmt.Errorf("fleet.autoscaled: the cluster's External metrics API (APIService %s) is served by %s; the API server sends every HPA's External metrics "+
		"to that one server, so this router cannot serve its fleet's demand beside it. Autoscale one fleet per cluster on the router's demand, "+
		"or remove the other server's APIService (KEDA's and prometheus-adapter's take this name) if nothing uses it", workloads.MetricsAPIService, owner)
}
