package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// GIEVersion is the Gateway API Inference Extension module whose
// InferencePool CRD the tests install (the Go module proxy serves it).
const GIEVersion = "v1.6.0"

// gieDir downloads (once, into the module cache) the Gateway API Inference
// Extension module and returns its directory.
func gieDir() (string, error) {
	return moduleDir("sigs.k8s.io/gateway-api-inference-extension", GIEVersion)
}

// InferencePoolCRDManifest is the InferencePool CRD file of the GIE module
// at GIEVersion, as its release publishes it.
func InferencePoolCRDManifest(t testing.TB) []byte {
	t.Helper()
	dir, err := gieDir()
	if err != nil {
		unavailable(t, "InferencePool CRD", err, "needs the Go module proxy (run .ci/run or make testenv once)")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config", "crd", "bases", "inference.networking.k8s.io_inferencepools.yaml"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return raw
}

// InstallInferencePoolCRD installs the real InferencePool CRD
// (inference.networking.k8s.io/v1) from the GIE module and waits until it
// is served; it is removed when the test ends.
func (c *Cluster) InstallInferencePoolCRD(t testing.TB) {
	t.Helper()
	c.installCRD(t, "inferencepools", InferencePoolCRDManifest(t))
}
