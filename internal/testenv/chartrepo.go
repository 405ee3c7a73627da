package testenv

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// ChartRepo is a stand-in for a public Helm chart repository (such as
// https://prometheus-community.github.io/helm-charts), which tests cannot
// reach: a plain HTTP server on 127.0.0.1 serving index.yaml and the
// packaged charts (.tgz), laid out as `helm repo index` lays out a real
// repository, with sha256 digests in the index.
type ChartRepo struct {
	// URL is the repository's base URL (http://127.0.0.1:PORT/charts), for
	// Helm's repository URL setting.
	URL string

	dir string
	mu  sync.Mutex
}

// StartChartRepo packages the charts into a new repository and serves it
// until the test ends.
func StartChartRepo(t testing.TB, charts ...*chart.Chart) *ChartRepo {
	t.Helper()
	r := &ChartRepo{dir: t.TempDir()}
	files := http.StripPrefix("/charts/", http.FileServer(http.Dir(r.dir)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/charts"
	r.Add(t, charts...)
	return r
}

// Add packages more charts (or versions) into the repository and rewrites
// its index, as a chart release does upstream.
func (r *ChartRepo) Add(t testing.TB, charts ...*chart.Chart) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range charts {
		if _, err := chartutil.Save(ch, r.dir); err != nil {
			t.Fatalf("testenv: packaging chart %s %s: %v", ch.Name(), ch.Metadata.Version, err)
		}
	}
	// Relative URLs, as many real repositories have: Helm resolves them against the repository URL.
	index, err := repo.IndexDirectory(r.dir, "")
	if err != nil {
		t.Fatalf("testenv: indexing the chart repository: %v", err)
	}
	index.SortEntries()
	tmp := filepath.Join(r.dir, "index.yaml.tmp")
	if err := index.WriteFile(tmp, 0o644); err != nil {
		t.Fatalf("testenv: writing the chart repository index: %v", err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, "index.yaml")); err != nil {
		t.Fatal(err)
	}
}
