package addons

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
)

// fetchTimeout bounds each download from a chart repository.
const fetchTimeout = 2 * time.Minute

// fetchChart downloads and loads the chart m pins, keeping whatever Helm
// writes (index cache, registry credentials file) under home, a private
// temporary directory. It never reads a chart from the working directory, as
// Helm's LocateChart would when a directory of the chart's name exists there.
func fetchChart(m chartRelease, home string) (*chart.Chart, error) {
	var (
		data []byte
		err  error
	)
	if strings.HasPrefix(m.Repository, "oci://") {
		data, err = pullOCI(m, home)
	} else {
		data, err = downloadFromIndex(m, home)
	}
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("loading chart %s %s from %s: %w", m.Chart, m.Version, m.Repository, err)
	}
	if ch.Metadata.Name != m.Chart || ch.Metadata.Version != m.Version {
		return nil, fmt.Errorf("repository %s served chart %s %s when asked for %s %s", m.Repository, ch.Metadata.Name, ch.Metadata.Version, m.Chart, m.Version)
	}
	return ch, nil
}

func downloadFromIndex(m chartRelease, home string) ([]byte, error) {
	providers := getter.Providers{{Schemes: []string{"http", "https"}, New: getter.NewHTTPGetter}}
	cr, err := repo.NewChartRepository(&repo.Entry{Name: "llmd", URL: m.Repository}, providers)
	if err != nil {
		return nil, fmt.Errorf("chart repository %s: %w", m.Repository, err)
	}
	cr.CachePath = filepath.Join(home, "repository")
	indexPath, err := cr.DownloadIndexFile()
	if err != nil {
		return nil, fmt.Errorf("reading the index of chart repository %s (check Repository, and that this machine can reach it): %w", m.Repository, err)
	}
	index, err := repo.LoadIndexFile(indexPath)
	if err != nil {
		return nil, fmt.Errorf("reading the index of chart repository %s: %w", m.Repository, err)
	}
	cv, err := index.Get(m.Chart, m.Version)
	if err != nil || cv.Version != m.Version {
		return nil, notInIndex(m, index)
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("chart %s %s in repository %s has no download URL", m.Chart, m.Version, m.Repository)
	}
	chartURL, err := repo.ResolveReferenceURL(m.Repository, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %s %s in repository %s: bad URL %q: %w", m.Chart, m.Version, m.Repository, cv.URLs[0], err)
	}
	g, err := getter.NewHTTPGetter()
	if err != nil {
		return nil, err
	}
	buf, err := g.Get(chartURL, getter.WithURL(m.Repository), getter.WithTimeout(fetchTimeout))
	if err != nil {
		return nil, fmt.Errorf("downloading chart %s %s from %s: %w", m.Chart, m.Version, chartURL, err)
	}
	data, err := io.ReadAll(buf)
	if err != nil {
		return nil, fmt.Errorf("downloading chart %s %s from %s: %w", m.Chart, m.Version, chartURL, err)
	}
	// The index's digest is the repository's word for the archive; a mirror
	// serving other bytes under the same version is refused.
	if cv.Digest != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != cv.Digest {
			return nil, fmt.Errorf("chart %s %s from %s: sha256 %s, but the repository index says %s", m.Chart, m.Version, chartURL, got, cv.Digest)
		}
	}
	return data, nil
}

// notInIndex names what the repository does have, newest first.
func notInIndex(m chartRelease, index *repo.IndexFile) error {
	versions := index.Entries[m.Chart]
	if len(versions) == 0 {
		return fmt.Errorf("chart %q is not in repository %s: check Chart and Repository", m.Chart, m.Repository)
	}
	var have []*semver.Version
	for _, v := range versions {
		if sv, err := semver.NewVersion(v.Version); err == nil {
			have = append(have, sv)
		}
	}
	slices.SortFunc(have, func(a, b *semver.Version) int { return b.Compare(a) })
	var names []string
	for i, v := range have {
		if i == 5 {
			names = append(names, "...")
			break
		}
		names = append(names, v.Original())
	}
	return fmt.Errorf("chart %s version %s is not in repository %s (it has %s): pin one of those in Version", m.Chart, m.Version, m.Repository, strings.Join(names, ", "))
}

func pullOCI(m chartRelease, home string) ([]byte, error) {
	client, err := registry.NewClient(
		registry.ClientOptCredentialsFile(filepath.Join(home, "registry", "config.json")),
		registry.ClientOptWriter(io.Discard),
	)
	if err != nil {
		return nil, fmt.Errorf("setting up the OCI registry client: %w", err)
	}
	ref := strings.TrimSuffix(strings.TrimPrefix(m.Repository, "oci://"), "/") + "/" + m.Chart + ":" + m.Version
	res, err := client.Pull(ref, registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("pulling chart %s %s from %s (check Repository and Version, and that this machine can reach the registry): %w", m.Chart, m.Version, m.Repository, err)
	}
	return res.Chart.Data, nil
}
