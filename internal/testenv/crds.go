package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// prometheusOperatorVersion is the module whose example CRDs the tests
// install: the real ServiceMonitor, PodMonitor, ... definitions, without
// the internet (the Go module proxy serves the module).
const prometheusOperatorVersion = "v0.85.0"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// prometheusOperatorCRDDir downloads (once, into the module cache) the
// prometheus-operator module and returns its directory of CRD manifests.
func prometheusOperatorCRDDir() (string, error) {
	dir, err := moduleDir("github.com/prometheus-operator/prometheus-operator", prometheusOperatorVersion)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "example", "prometheus-operator-crd"), nil
}

// moduleDir downloads (once, into the module cache) a Go module that ships
// manifests and returns its directory.
func moduleDir(path, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s %s: %w", path, version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("locating the module %s: no Dir in %s", path, out)
	}
	return mod.Dir, nil
}

// InstallPrometheusOperatorCRD installs one of prometheus-operator's real
// CRDs (e.g. "podmonitors", "servicemonitors") and waits until it is served.
// It is removed when the test ends, since CRDs are cluster-wide.
func (c *Cluster) InstallPrometheusOperatorCRD(t testing.TB, plural string) {
	t.Helper()
	dir, err := prometheusOperatorCRDDir()
	if err != nil {
		unavailable(t, "prometheus-operator CRDs", err, "needs the Go module proxy (run .ci/run or make testenv once)")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "monitoring.coreos.com_"+plural+".yaml"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	c.installCRD(t, plural, raw)
}

// installCRD creates the CRD manifest raw (named plural in messages), waits
// until it is served and removes it when the test ends.
func (c *Cluster) installCRD(t testing.TB, plural string, raw []byte) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("testenv: decoding the %s CRD: %v", plural, err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crds := dyn.Resource(crdResource)
	if _, err := crds.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: creating the %s CRD: %v", plural, err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testenv: deleting the %s CRD: %v", plural, err)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil && crdEstablished(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: the %s CRD is not established after 30s (%v)", plural, err)
		}
	}
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
