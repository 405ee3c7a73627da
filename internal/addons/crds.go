package addons

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// chartCRDs are the CustomResourceDefinitions in the crds/ directories of
// the chart and its subcharts (kube-prometheus-stack keeps them in the
// "crds" subchart), in a stable order.
func chartCRDs(ch *chart.Chart) ([]kube.Object, error) {
	var out []kube.Object
	for _, f := range ch.CRDObjects() {
		docs := releaseutil.SplitManifests(string(f.File.Data))
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(docs[k]), &obj); err != nil {
				return nil, fmt.Errorf("reading %s of chart %s: %w", f.Filename, ch.Name(), err)
			}
			if len(obj) == 0 {
				continue
			}
			u := unstructured.Unstructured{Object: obj}
			if u.GroupVersionKind() != (schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}) {
				return nil, fmt.Errorf("%s of chart %s holds a %s, not an apiextensions.k8s.io/v1 CustomResourceDefinition", f.Filename, ch.Name(), u.GroupVersionKind())
			}
			o, err := kube.FromApplyConfiguration(obj)
			if err != nil {
				return nil, fmt.Errorf("reading %s of chart %s: %w", f.Filename, ch.Name(), err)
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// applyCRDs applies the chart's CRDs server-side under the field manager
// llmd, taking over fields an earlier Helm install (or kubectl) set, and
// waits until each is Established, i.e. served: Helm installs CRDs only on
// first install and never upgrades them (helm#944), so without this a chart
// upgrade runs against the old schemas.
func applyCRDs(ctx context.Context, kc *kube.Client, ch *chart.Chart, deadline time.Time, logf Logf) error {
	crds, err := chartCRDs(ch)
	if err != nil {
		return err
	}
	if len(crds) == 0 {
		return nil
	}
	if err := kc.Apply(ctx, crds, true); err != nil {
		return fmt.Errorf("applying the CRDs of chart %s %s: %w", ch.Name(), ch.Metadata.Version, err)
	}
	logf.printf("applied %d CRDs of chart %s %s server-side", len(crds), ch.Name(), ch.Metadata.Version)
	for _, o := range crds {
		if err := waitEstablished(ctx, kc, o.Name, deadline); err != nil {
			return err
		}
		if err := waitDiscovered(ctx, kc, o, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitDiscovered waits until API discovery lists the CRD's kind: Helm maps
// the chart's objects (a Prometheus, an Alertmanager) through discovery, and
// Established can come a moment before discovery shows a new group.
func waitDiscovered(ctx context.Context, kc *kube.Client, crd kube.Object, deadline time.Time) error {
	body := crd.Body().Object
	group, _, _ := unstructured.NestedString(body, "spec", "group")
	kind, _, _ := unstructured.NestedString(body, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(body, "spec", "versions")
	version := ""
	for _, v := range versions {
		if m, _ := v.(map[string]any); m["served"] == true {
			version, _ = m["name"].(string)
			break
		}
	}
	if version == "" {
		return nil // serves nothing: nothing for Helm to map
	}
	gvk := schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
	for {
		ok, err := kc.Serves(gvk)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s is Established but discovery does not list %s within the timeout", crd.Name, gvk)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s in API discovery: %w", gvk, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitEstablished(ctx context.Context, kc *kube.Client, name string, deadline time.Time) error {
	for {
		crd, err := kc.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		if err == nil {
			established, why := crdCondition(crd, "Established")
			if established {
				return nil
			}
			if ok, msg := crdCondition(crd, "NamesAccepted"); !ok && msg != "" {
				return fmt.Errorf("CRD %s is not served: NamesAccepted is false: %s", name, msg)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s is not Established within the timeout (%s)", name, why)
			}
		} else if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s was applied but is not found", name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for CRD %s: %w", name, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// crdCondition reports whether a condition is True, and its message when it is not.
func crdCondition(crd *unstructured.Unstructured, condType string) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condType {
			msg, _ := m["message"].(string)
			return m["status"] == "True", msg
		}
	}
	return false, ""
}
