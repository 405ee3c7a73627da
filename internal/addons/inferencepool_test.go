package addons

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInferencePoolCRDIsGIEs: the embedded CRD is the GIE module's file at
// the pinned version, byte for byte, and the version the tests install.
func TestInferencePoolCRDIsGIEs(t *testing.T) {
	if GIEVersion != testenv.GIEVersion {
		t.Fatalf("the provider pins GIE %s, the tests install %s", GIEVersion, testenv.GIEVersion)
	}
	if !bytes.Equal(inferencePoolCRD, testenv.InferencePoolCRDManifest(t)) {
		t.Fatalf("gie/%s differs from the GIE module's config/crd/bases/%s at %s: copy it again", InferencePoolCRDFile, InferencePoolCRDFile, GIEVersion)
	}
}

// TestApplyInferencePoolCRD: on a real API server without the CRD, the
// add-on applies it, returns once it is served, and a pool as GIE's API
// defines it is then admitted with the defaults the CRD sets
// (failureMode FailClose); a second apply (an upgrade, a repair) is a no-op.
func TestApplyInferencePoolCRD(t *testing.T) {
	c := testenv.StartCluster(t)
	kc, err := kube.NewClient(c.RESTConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crd, err := InferencePoolCRD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), []kube.Ref{crd.Ref}) })
	if served, err := kc.Serves(InferencePoolKind); err != nil || served {
		t.Fatalf("the CRD is served before the add-on: %v %v", served, err)
	}
	var logs []string
	logf := Logf(func(f string, a ...any) { logs = append(logs, f) })
	for range 2 {
		if err := ApplyInferencePoolCRD(ctx, kc, time.Minute, logf); err != nil {
			t.Fatal(err)
		}
	}
	if served, err := kc.Serves(InferencePoolKind); err != nil || !served {
		t.Fatalf("the CRD is not served after the add-on: %v %v", served, err)
	}
	ns := c.Namespace(t)
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"name": "pool", "namespace": ns},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"targetPorts":       []any{map[string]any{"number": int64(8000)}},
			"endpointPickerRef": map[string]any{"name": "router", "port": map[string]any{"number": int64(9002)}}},
	}}
	got, err := kc.Dynamic.Resource(InferencePoolKind.GroupVersion().WithResource("inferencepools")).Namespace(ns).Create(ctx, pool, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mode, _, _ := unstructured.NestedString(got.Object, "spec", "endpointPickerRef", "failureMode"); mode != "FailClose" {
		t.Fatalf("failureMode defaulted to %q, want GIE's FailClose", mode)
	}
	if len(logs) != 2 {
		t.Fatalf("logged %q", logs)
	}
}
