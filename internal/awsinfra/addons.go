package awsinfra

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// addonPhase says when an add-on is installed: networking and pod identity
// before nodes join (nodes need the CNI to become Ready), Deployments that
// need nodes to schedule on after.
type addonPhase int

const (
	addonsBeforeNodes addonPhase = iota
	addonsAfterNodes
)

// KnownAddons are the EKS managed add-ons the cluster manages, by EKS name,
// with the phase they are installed in.
var KnownAddons = []struct {
	Name  string
	phase addonPhase
}{
	{"vpc-cni", addonsBeforeNodes},
	{"kube-proxy", addonsBeforeNodes},
	{"eks-pod-identity-agent", addonsBeforeNodes},
	{"coredns", addonsAfterNodes},
	{"aws-fsx-csi-driver", addonsAfterNodes},
}

func phaseOf(name string) addonPhase {
	for _, a := range KnownAddons {
		if a.Name == name {
			return a.phase
		}
	}
	return addonsAfterNodes
}

// AddonSpec is one EKS managed add-on to install.
type AddonSpec struct {
	// Name is the EKS add-on name, e.g. "aws-fsx-csi-driver".
	Name string
	// Version pins the add-on version; empty takes EKS's default version for
	// the cluster's Kubernetes version, and keeps an installed version while
	// it stays compatible.
	Version string
	// ResolveConflicts is OVERWRITE, PRESERVE or NONE: what EKS does with
	// fields someone else set on the add-on's Kubernetes objects.
	ResolveConflicts string
}

// Addon is what EKS reports about an installed add-on.
type Addon struct {
	Name    string
	ARN     string
	Version string
	Status  string
	Tags    map[string]string
}

// findAddons lists the cluster's known add-ons that are installed.
func (c *Clients) findAddons(ctx context.Context, cluster string) ([]Addon, error) {
	var out []Addon
	for _, k := range KnownAddons {
		a, err := c.findAddon(ctx, cluster, k.Name)
		if err != nil {
			return nil, err
		}
		if a != nil {
			out = append(out, *a)
		}
	}
	return out, nil
}

// findAddon describes an add-on; nil when it is not installed.
func (c *Clients) findAddon(ctx context.Context, cluster, name string) (*Addon, error) {
	out, err := c.EKS.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(cluster), AddonName: aws.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing EKS add-on %s of cluster %s: %w", name, cluster, err)
	}
	a := out.Addon
	return &Addon{Name: name, ARN: aws.ToString(a.AddonArn), Version: aws.ToString(a.AddonVersion), Status: string(a.Status), Tags: a.Tags}, nil
}

// addonVersions are the versions EKS offers for the add-on on a Kubernetes
// version, newest first, and the one EKS marks as that version's default.
func (c *Clients) addonVersions(ctx context.Context, name, kubernetesVersion string) (versions []string, def string, err error) {
	p := eks.NewDescribeAddonVersionsPaginator(c.EKS, &eks.DescribeAddonVersionsInput{AddonName: aws.String(name), KubernetesVersion: aws.String(kubernetesVersion)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("listing versions of EKS add-on %s for Kubernetes %s: %w", name, kubernetesVersion, err)
		}
		for _, info := range page.Addons {
			for _, v := range info.AddonVersions {
				versions = append(versions, aws.ToString(v.AddonVersion))
				for _, compat := range v.Compatibilities {
					if aws.ToString(compat.ClusterVersion) == kubernetesVersion && compat.DefaultVersion && def == "" {
						def = aws.ToString(v.AddonVersion)
					}
				}
			}
		}
	}
	if len(versions) == 0 {
		return nil, "", fmt.Errorf("addons: EKS offers no version of %s for Kubernetes %s", name, kubernetesVersion)
	}
	if def == "" {
		def = versions[0]
	}
	return versions, def, nil
}

// ensureAddons installs, upgrades or repairs the add-ons of one phase, in
// parallel. A pinned version is installed as given; an unpinned one gets
// EKS's default for the Kubernetes version, and an installed one is kept
// while EKS still offers it for that version. An add-on found DEGRADED or
// UPDATE_FAILED (someone changed its objects) is updated with its conflict
// policy, which makes EKS apply its configuration again.
func (c *Clients) ensureAddons(ctx context.Context, spec ClusterSpec, phase addonPhase) error {
	jobs := []func() error{}
	for _, a := range spec.Addons {
		if phaseOf(a.Name) == phase {
			jobs = append(jobs, func() error { return c.ensureAddon(ctx, spec, a) })
		}
	}
	return parallel(jobs...)
}

func (c *Clients) ensureAddon(ctx context.Context, spec ClusterSpec, want AddonSpec) error {
	if want.Name == fsxCSIAddon {
		if err := c.ensureFSxCSIIdentity(ctx, spec); err != nil {
			return err
		}
	}
	have, err := c.findAddon(ctx, spec.Name, want.Name)
	if err != nil {
		return err
	}
	version := want.Version
	if version == "" {
		versions, def, err := c.addonVersions(ctx, want.Name, spec.KubernetesVersion)
		if err != nil {
			return err
		}
		version = def
		if have != nil && slices.Contains(versions, have.Version) {
			version = have.Version
		}
	}
	target := updateTarget{cluster: spec.Name, addon: want.Name}
	switch {
	case have == nil:
		err := c.createRetryingIAM(ctx, "EKS add-on "+want.Name+" to be accepted", func(ctx context.Context) error {
			_, err := c.EKS.CreateAddon(ctx, &eks.CreateAddonInput{ClusterName: aws.String(spec.Name), AddonName: aws.String(want.Name),
				AddonVersion: aws.String(version), ResolveConflicts: ekstypes.ResolveConflicts(want.ResolveConflicts),
				Tags: c.tagSet(spec.Name, spec.Tags, "addon-"+want.Name)})
			return err
		})
		if err != nil {
			return fmt.Errorf("creating EKS add-on %s %s: %w", want.Name, version, err)
		}
	case have.Status == string(ekstypes.AddonStatusCreateFailed):
		return fmt.Errorf("EKS add-on %s of cluster %s is CREATE_FAILED%s; delete it (aws eks delete-addon --cluster-name %s --addon-name %s) and apply again",
			want.Name, spec.Name, c.addonIssues(ctx, spec.Name, want.Name), spec.Name, want.Name)
	case have.Version != version || have.Status == string(ekstypes.AddonStatusDegraded) || have.Status == string(ekstypes.AddonStatusUpdateFailed):
		c.logf(ctx, "updating EKS add-on", map[string]any{"addon": want.Name, "from": have.Version, "to": version, "status": have.Status})
		out, err := c.EKS.UpdateAddon(ctx, &eks.UpdateAddonInput{ClusterName: aws.String(spec.Name), AddonName: aws.String(want.Name),
			AddonVersion: aws.String(version), ResolveConflicts: ekstypes.ResolveConflicts(want.ResolveConflicts)})
		if err != nil {
			return fmt.Errorf("updating EKS add-on %s from %s to %s: %w", want.Name, have.Version, version, err)
		}
		if err := c.waitUpdate(ctx, target, out.Update); err != nil {
			return err
		}
	}
	if have != nil && have.ARN != "" {
		if err := c.syncEKSTags(ctx, have.ARN, have.Tags, c.tagSet(spec.Name, spec.Tags, "addon-"+want.Name)); err != nil {
			return err
		}
	}
	return c.waitAddonActive(ctx, spec.Name, want.Name)
}

// waitAddonActive waits through CREATING, UPDATING and DEGRADED: add-ons
// whose pods schedule on nodes (coredns, the FSx CSI driver) report DEGRADED
// with InsufficientNumberOfReplicas while the nodes are young
// (terraform-provider-aws eks/addon.go waitAddonCreated waits through it;
// hashicorp/terraform-provider-aws#20404). One still DEGRADED at the
// deadline times out naming its health issues; CREATE_FAILED, UPDATE_FAILED
// and the rest end the wait at once with them.
func (c *Clients) waitAddonActive(ctx context.Context, cluster, name string) error {
	return c.waitFor(ctx, "EKS add-on "+name+" to become ACTIVE", func(ctx context.Context) error {
		out, err := c.EKS.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(cluster), AddonName: aws.String(name)})
		if isNotFound(err) {
			return pending("not found yet")
		}
		if err != nil {
			return fmt.Errorf("describing EKS add-on %s: %w", name, err)
		}
		switch st := out.Addon.Status; st {
		case ekstypes.AddonStatusActive:
			return nil
		case ekstypes.AddonStatusCreating, ekstypes.AddonStatusUpdating, ekstypes.AddonStatusDegraded:
			return pending("status %s%s", st, addonHealth(out.Addon.Health))
		default:
			return fmt.Errorf("EKS add-on %s is %s%s", name, st, addonHealth(out.Addon.Health))
		}
	})
}

func addonHealth(h *ekstypes.AddonHealth) string {
	if h == nil {
		return issuesText(0, nil)
	}
	return issuesText(len(h.Issues), func(i int) string {
		return issueText(string(h.Issues[i].Code), aws.ToString(h.Issues[i].Message), h.Issues[i].ResourceIds)
	})
}

func (c *Clients) addonIssues(ctx context.Context, cluster, name string) string {
	out, err := c.EKS.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(cluster), AddonName: aws.String(name)})
	if err != nil {
		return ""
	}
	return addonHealth(out.Addon.Health)
}

// removeAddons deletes installed add-ons the cluster created (owner tag)
// that the spec no longer enables, leaving their Kubernetes objects out
// (preserve false): turning an add-on off removes it.
func (c *Clients) removeAddons(ctx context.Context, spec ClusterSpec, have []Addon) error {
	enabled := map[string]bool{}
	for _, a := range spec.Addons {
		enabled[a.Name] = true
	}
	jobs := []func() error{}
	for _, h := range have {
		if enabled[h.Name] || h.Tags[OwnerTag] != spec.Name {
			continue
		}
		jobs = append(jobs, func() error {
			if _, err := c.EKS.DeleteAddon(ctx, &eks.DeleteAddonInput{ClusterName: aws.String(spec.Name), AddonName: aws.String(h.Name)}); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting EKS add-on %s: %w", h.Name, err)
			}
			err := c.waitFor(ctx, "EKS add-on "+h.Name+" to be deleted", func(ctx context.Context) error {
				a, err := c.findAddon(ctx, spec.Name, h.Name)
				if err != nil || a == nil {
					return err
				}
				return pending("status %s", a.Status)
			})
			if err != nil || h.Name != fsxCSIAddon {
				return err
			}
			return c.deleteFSxCSIIdentity(ctx, spec.Name)
		})
	}
	return parallel(jobs...)
}
