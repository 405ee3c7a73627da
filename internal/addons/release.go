package addons

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// maxHistory bounds the release records Helm keeps (one Secret each).
const maxHistory = 10

// Status is the release as deployed, for the cluster resource to store and compare.
type Status struct {
	// Revision is Helm's release revision (1 on install, +1 per upgrade or rollback).
	Revision int
	// Status is Helm's word: deployed, failed, pending-install, pending-upgrade, ...
	Status string
	// Chart and ChartVersion are the chart the release runs; AppVersion its appVersion.
	Chart        string
	ChartVersion string
	AppVersion   string
	// ValuesHash is the sha256 of the release's user-supplied values (compare
	// with Monitoring.ValuesHash); the values themselves are not exported.
	ValuesHash string
	// Description is Helm's note on the last operation ("Upgrade complete",
	// or why it failed).
	Description string
	// Updated is when the revision was deployed.
	Updated time.Time
}

func statusOf(rel *release.Release) Status {
	s := Status{Revision: rel.Version, ValuesHash: valuesHash(rel.Config)}
	if rel.Info != nil {
		s.Status = rel.Info.Status.String()
		s.Description = rel.Info.Description
		s.Updated = rel.Info.LastDeployed.Time
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		s.Chart = rel.Chart.Metadata.Name
		s.ChartVersion = rel.Chart.Metadata.Version
		s.AppVersion = rel.Chart.Metadata.AppVersion
	}
	return s
}

// Release is a Helm release of a pinned chart that Apply, Read and
// Uninstall manage: Monitoring or Karpenter.
type Release interface {
	// Validate checks the release without reaching any cluster or
	// repository; each error names the field and the fix.
	Validate() error
	// chartRelease is the release with its defaults filled in.
	chartRelease() chartRelease
}

// chartRelease is what Helm is told of a Release.
type chartRelease struct {
	Namespace, Release, Repository, Chart, Version string
	// Values are the release's user-supplied values, exactly.
	Values map[string]any
	// Timeout bounds one Apply or Uninstall, waits included.
	Timeout time.Duration
	// Prepare checks the cluster before Helm runs (nil: nothing to check).
	Prepare func(ctx context.Context, kc *kube.Client) error
}

// Apply makes the release match r: it downloads the pinned chart, applies
// its CRDs server-side and waits until they are served, recovers a release
// an interrupted earlier apply left pending, and installs or upgrades with
// r's values, waiting until the release's workloads are ready (its Timeout).
// A release that failed before is upgraded in place, never replaced.
//
// Every Apply makes a new Helm revision (Helm's upgrade also restores
// objects deleted behind its back): call it when the desired release
// changed or Read reports drift. When the recovery, install or upgrade fails,
// the returned Status is the release as it stands (a failed revision, say),
// so the caller can record it; a wait that timed out names the Deployments
// that are not ready and why. On an earlier error (input, chart download,
// Prepare's check, CRDs) or a cancelled context the Status is zero: keep the
// prior state. Progress and every recovery step go to logf.
func Apply(ctx context.Context, cfg *rest.Config, r Release, logf func(format string, args ...any)) (Status, error) {
	log, closeLog := gated(logf)
	defer closeLog()
	if err := r.Validate(); err != nil {
		return Status{}, err
	}
	m := r.chartRelease()
	deadline := time.Now().Add(m.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	home, err := os.MkdirTemp("", "llmd-helm-")
	if err != nil {
		return Status{}, fmt.Errorf("making a private Helm home: %w", err)
	}
	defer os.RemoveAll(home)
	ch, err := fetchChart(m, home)
	if err != nil {
		return Status{}, err
	}
	log.printf("fetched chart %s %s from %s", m.Chart, m.Version, m.Repository)

	kc, err := kube.NewClient(boundTo(ctx, cfg), nil)
	if err != nil {
		return Status{}, err
	}
	kc.Poll = 200 * time.Millisecond
	if m.Prepare != nil {
		if err := m.Prepare(ctx, kc); err != nil {
			return Status{}, err
		}
	}
	if err := applyCRDs(ctx, kc, ch, deadline, log); err != nil {
		return Status{}, err
	}
	// Helm is set up after the CRDs are served, so its discovery sees their kinds.
	hc, err := newHelm(ctx, cfg, m.Namespace, log)
	if err != nil {
		return Status{}, err
	}
	upgrade, err := recoverRelease(hc, m, deadline, log)
	if err != nil {
		return current(hc, m), err
	}
	var rel *release.Release
	if upgrade {
		rel, err = upgradeRelease(ctx, hc, m, ch, deadline)
	} else {
		rel, err = installRelease(ctx, hc, m, ch, deadline)
	}
	if err != nil {
		return current(hc, m), explainNotReady(ctx, kc, m, err)
	}
	log.printf("release %s/%s is %s at revision %d (chart %s %s)", m.Namespace, m.Release, rel.Info.Status, rel.Version, m.Chart, m.Version)
	return statusOf(rel), nil
}

// current is the release's latest record, or zero when there is none or it cannot be read.
func current(hc *action.Configuration, m chartRelease) Status {
	rel, err := hc.Releases.Last(m.Release)
	if err != nil {
		return Status{}
	}
	return statusOf(rel)
}

func remaining(deadline time.Time) time.Duration {
	// Helm treats a zero timeout as "no wait"; past the deadline, fail fast instead.
	return max(time.Until(deadline), time.Second)
}

// checkGrafanaSecret fails before Helm runs if the admin Secret is missing,
// rather than leaving Grafana crash-looping until the wait times out.
func (m Monitoring) checkGrafanaSecret(ctx context.Context, kc *kube.Client) error {
	s, err := kc.Typed.CoreV1().Secrets(m.Namespace).Get(ctx, m.GrafanaAdminSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("GrafanaAdminSecret: Secret %s/%s does not exist: write it (keys %s and %s) before installing monitoring", m.Namespace, m.GrafanaAdminSecret, GrafanaAdminUserKey, GrafanaAdminPasswordKey)
	case err != nil:
		return fmt.Errorf("reading Secret %s/%s (GrafanaAdminSecret): %w", m.Namespace, m.GrafanaAdminSecret, err)
	}
	for _, k := range []string{GrafanaAdminUserKey, GrafanaAdminPasswordKey} {
		if len(s.Data[k]) == 0 && s.StringData[k] == "" {
			return fmt.Errorf("GrafanaAdminSecret: Secret %s/%s has no key %s: it needs %s and %s", m.Namespace, m.GrafanaAdminSecret, k, GrafanaAdminUserKey, GrafanaAdminPasswordKey)
		}
	}
	return nil
}

// recoverRelease makes the release operable again and says whether the next
// step is an upgrade (a release exists) or an install. Helm refuses to
// upgrade a release another operation holds (pending-*), and an interrupted
// apply leaves it so forever (helm#8987):
//   - pending-install (or uninstalling): nothing was ever deployed; uninstall
//     what the interrupted install created, then install afresh;
//   - pending-upgrade or pending-rollback: roll back to the last deployed
//     revision, which also removes what the interrupted upgrade added; if no
//     revision was ever deployed, mark the pending one failed;
//   - failed, deployed, superseded: upgrade.
//
// Terraform's state lock keeps two llmd applies of one cluster apart; an
// operation another tool runs at this very moment would be taken for an
// interrupted one, which is why each recovery is logged with the revision.
func recoverRelease(hc *action.Configuration, m chartRelease, deadline time.Time, log Logf) (upgrade bool, err error) {
	last, err := hc.Releases.Last(m.Release)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Helm release %s/%s: %w", m.Namespace, m.Release, err)
	}
	name := fmt.Sprintf("%s/%s", m.Namespace, m.Release)
	switch last.Info.Status {
	case release.StatusPendingInstall, release.StatusUninstalling:
		log.printf("release %s was left %s at revision %d by an interrupted earlier apply: uninstalling it, then installing again", name, last.Info.Status, last.Version)
		if err := uninstall(hc, m, deadline); err != nil {
			return false, fmt.Errorf("recovering release %s from %s: %w", name, last.Info.Status, err)
		}
		return false, nil
	case release.StatusPendingUpgrade, release.StatusPendingRollback:
		deployed, err := hc.Releases.Deployed(m.Release)
		if err != nil && !errors.Is(err, driver.ErrNoDeployedReleases) {
			return false, fmt.Errorf("reading the deployed revision of release %s: %w", name, err)
		}
		if deployed == nil {
			log.printf("release %s was left %s at revision %d by an interrupted earlier apply and has no deployed revision: marking it failed, then upgrading", name, last.Info.Status, last.Version)
			last.Info.Description = "marked failed by llmd: left " + last.Info.Status.String() + " by an interrupted apply"
			last.Info.Status = release.StatusFailed
			if err := hc.Releases.Update(last); err != nil {
				return false, fmt.Errorf("recovering release %s: marking revision %d failed: %w", name, last.Version, err)
			}
			return true, nil
		}
		log.printf("release %s was left %s at revision %d by an interrupted earlier apply: rolling back to deployed revision %d, then upgrading", name, last.Info.Status, last.Version, deployed.Version)
		rb := action.NewRollback(hc)
		rb.Version = deployed.Version
		rb.Wait = true
		rb.Timeout = remaining(deadline)
		rb.MaxHistory = maxHistory
		if err := rb.Run(m.Release); err != nil {
			return false, fmt.Errorf("recovering release %s from %s: rolling back to revision %d: %w", name, last.Info.Status, deployed.Version, err)
		}
		return true, nil
	case release.StatusUninstalled:
		// Kept history of an uninstall (helm uninstall --keep-history): install over it.
		return false, nil
	}
	return true, nil
}

func installRelease(ctx context.Context, hc *action.Configuration, m chartRelease, ch *chart.Chart, deadline time.Time) (*release.Release, error) {
	in := action.NewInstall(hc)
	in.ReleaseName = m.Release
	in.Namespace = m.Namespace
	in.SkipCRDs = true // applied server-side already
	in.Wait = true
	in.Timeout = remaining(deadline)
	in.Replace = true // only ever reuses the name of an uninstalled release (kept history)
	rel, err := in.RunWithContext(ctx, ch, m.Values)
	if err != nil {
		return nil, fmt.Errorf("installing chart %s %s as release %s/%s: %w", m.Chart, m.Version, m.Namespace, m.Release, err)
	}
	return rel, nil
}

func upgradeRelease(ctx context.Context, hc *action.Configuration, m chartRelease, ch *chart.Chart, deadline time.Time) (*release.Release, error) {
	up := action.NewUpgrade(hc)
	up.Namespace = m.Namespace
	up.SkipCRDs = true
	up.Wait = true
	up.Timeout = remaining(deadline)
	// Exactly m's values: whatever another actor set with helm upgrade is reset.
	up.ResetValues = true
	up.MaxHistory = maxHistory
	rel, err := up.RunWithContext(ctx, m.Release, ch, m.Values)
	if err != nil {
		return nil, fmt.Errorf("upgrading release %s/%s to chart %s %s: %w", m.Namespace, m.Release, m.Chart, m.Version, err)
	}
	return rel, nil
}

// Read returns the release's latest revision and how it differs from m, as
// sorted, deterministic lines: "chart version 1.2.3, want 1.2.4", "status
// pending-upgrade", "values: prometheus.prometheusSpec.retention = 10d, want
// 15d". With no release it returns nil, nil, nil (the caller plans a create).
func Read(ctx context.Context, cfg *rest.Config, r Release) (*Status, []string, error) {
	if err := r.Validate(); err != nil {
		return nil, nil, err
	}
	m := r.chartRelease()
	hc, err := newHelm(ctx, cfg, m.Namespace, nil)
	if err != nil {
		return nil, nil, err
	}
	rel, err := hc.Releases.Last(m.Release)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading Helm release %s/%s: %w", m.Namespace, m.Release, err)
	}
	s := statusOf(rel)
	return &s, drift(s, rel.Config, m), nil
}

// Uninstall removes the release and waits until its objects are gone. No
// release is not an error. The CRDs stay: deleting a CRD deletes every
// object of its kind in the cluster, so every ServiceMonitor, PodMonitor and
// PrometheusRule other teams (and llmd's fleets) created would go with it.
func Uninstall(ctx context.Context, cfg *rest.Config, r Release) error {
	m := r.chartRelease()
	if err := validateTarget(m.Namespace, m.Release); err != nil {
		return err
	}
	if m.Timeout < 0 {
		return fmt.Errorf("Timeout %s is negative", m.Timeout)
	}
	hc, err := newHelm(ctx, cfg, m.Namespace, nil)
	if err != nil {
		return err
	}
	return uninstall(hc, m, time.Now().Add(m.Timeout))
}

func uninstall(hc *action.Configuration, m chartRelease, deadline time.Time) error {
	un := action.NewUninstall(hc)
	un.Wait = true
	un.Timeout = remaining(deadline)
	un.IgnoreNotFound = true
	if _, err := un.Run(m.Release); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %s/%s: %w", m.Namespace, m.Release, err)
	}
	return nil
}
