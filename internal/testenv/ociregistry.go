package testenv

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

// StartOCIRegistry is a stand-in for an OCI registry holding Helm charts
// (such as oci://ghcr.io/prometheus-community/charts, or a private ECR
// mirror): go-containerregistry's in-memory registry on 127.0.0.1, plain
// HTTP, with the charts pushed by Helm's own registry client. It returns the
// repository URL to give Helm (oci://127.0.0.1:PORT/charts); the registry
// lives until the test ends.
func StartOCIRegistry(t testing.TB, charts ...*chart.Chart) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatalf("testenv: Helm registry client: %v", err)
	}
	dir := t.TempDir()
	for _, ch := range charts {
		path, err := chartutil.Save(ch, dir)
		if err != nil {
			t.Fatalf("testenv: packaging chart %s %s: %v", ch.Name(), ch.Metadata.Version, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ref := host + "/charts/" + ch.Name() + ":" + ch.Metadata.Version
		if _, err := client.Push(data, ref); err != nil {
			t.Fatalf("testenv: pushing chart %s to the OCI registry stand-in: %v", ref, err)
		}
	}
	return "oci://" + host + "/charts"
}
