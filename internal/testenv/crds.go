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
	name, _, err := c.createCRD(context.Background(), raw)
	if err != nil {
		t.Fatalf("testenv: the %s CRD: %v", plural, err)
	}
	t.Cleanup(func() {
		if err := c.deleteCRD(name); err != nil {
			t.Errorf("testenv: deleting the %s CRD: %v", plural, err)
		}
	})
}

// createCRD creates the CRD manifest raw unless it exists (created says
// which) and waits until it is served; it returns the CRD's name.
func (c *Cluster) createCRD(ctx context.Context, raw []byte) (name string, created bool, err error) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return "", false, fmt.Errorf("decoding: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return "", false, err
	}
	crds := dyn.Resource(crdResource)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if !created {
			_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return obj.GetName(), false, fmt.Errorf("creating: %w", err)
			}
			created = err == nil
		}
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		// One still being deleted (by an earlier test) is waited out.
		if err == nil && got.GetDeletionTimestamp() == nil && crdEstablished(got) {
			return obj.GetName(), created, nil
		}
		if time.Now().After(deadline) {
			return obj.GetName(), created, fmt.Errorf("not established after 30s (%v)", err)
		}
	}
}

// deleteCRD deletes the CRD name (and with it every object of its kind).
func (c *Cluster) deleteCRD(name string) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	if err := dyn.Resource(crdResource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
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
