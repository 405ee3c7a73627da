package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// accessEntryPart tags the access entries the cluster's access_entries
// manage, apart from the admin entry of the applying identity.
const accessEntryPart = "access-entry"

// adoptedEntryPart tags an entry access_entries declares that existed before
// (EKS makes the node role's and, with bootstrap, the creator's by itself):
// it is read back like the others, and when no longer declared its policy
// goes but the entry stays, since nodes or the creator depend on it.
const adoptedEntryPart = "access-entry-adopted"

// adminEntryPart tags the admin access entry of the identity that created
// the cluster; import finds the admin principal by it, whoever imports.
const adminEntryPart = "admin-access-entry"

// AccessEntrySpec grants a principal (a CI role, a person's role) one EKS
// access policy, cluster-wide or in some namespaces.
type AccessEntrySpec struct {
	PrincipalARN string
	PolicyARN    string
	// Namespaces limit the policy; empty means the whole cluster.
	Namespaces []string
}

// AccessEntry is what EKS reports about a managed access entry.
type AccessEntry struct {
	AccessEntrySpec
	// Adopted reports an entry that existed before access_entries declared it.
	Adopted bool
}

// findAccessEntries reads the entries access_entries manage (by their part
// tag) with their policy; the admin entry and foreign entries are left out.
func (c *Clients) findAccessEntries(ctx context.Context, cluster string) ([]AccessEntry, error) {
	var out []AccessEntry
	p := eks.NewListAccessEntriesPaginator(c.EKS, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if isNotImplemented(err) || isNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing access entries of EKS cluster %s: %w", cluster, err)
		}
		for _, principal := range page.AccessEntries {
			e, err := c.findAccessEntry(ctx, cluster, principal)
			if err != nil {
				return nil, err
			}
			if e != nil {
				out = append(out, *e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PrincipalARN < out[j].PrincipalARN })
	return out, nil
}

// findAccessEntry is one managed entry; nil when it is gone or not managed by access_entries.
func (c *Clients) findAccessEntry(ctx context.Context, cluster, principal string) (*AccessEntry, error) {
	got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing access entry %s on cluster %s: %w", principal, cluster, err)
	}
	part := got.AccessEntry.Tags[partTag]
	if part != accessEntryPart && part != adoptedEntryPart {
		// The admin entry, entries EKS made itself and foreign ones: never
		// read into access_entries, so never a diff and never deleted.
		return nil, nil
	}
	pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal)})
	if err != nil {
		return nil, fmt.Errorf("listing access policies of %s on cluster %s: %w", principal, cluster, err)
	}
	e := &AccessEntry{AccessEntrySpec: AccessEntrySpec{PrincipalARN: principal}, Adopted: part == adoptedEntryPart}
	if len(pols.AssociatedAccessPolicies) > 0 {
		p := pols.AssociatedAccessPolicies[0]
		e.PolicyARN = aws.ToString(p.PolicyArn)
		if p.AccessScope != nil && p.AccessScope.Type == ekstypes.AccessScopeTypeNamespace {
			e.Namespaces = slices.Sorted(slices.Values(p.AccessScope.Namespaces))
		}
	}
	return e, nil
}

// ensureAccessEntries brings the managed entries to spec: missing or changed
// ones are created and given their policy (any other policy removed),
// entries no longer wanted are deleted. have is what a Find read; nil on create.
func (c *Clients) ensureAccessEntries(ctx context.Context, spec ClusterSpec, have []AccessEntry) error {
	haveBy := map[string]AccessEntry{}
	for _, e := range have {
		haveBy[e.PrincipalARN] = e
	}
	jobs := []func() error{}
	wanted := map[string]bool{}
	for _, want := range spec.AccessEntries {
		wanted[want.PrincipalARN] = true
		if h, ok := haveBy[want.PrincipalARN]; ok && h.PolicyARN == want.PolicyARN && slices.Equal(h.Namespaces, want.Namespaces) {
			continue
		}
		jobs = append(jobs, func() error { return c.putAccessEntry(ctx, spec, want) })
	}
	for _, h := range have {
		if !wanted[h.PrincipalARN] {
			jobs = append(jobs, func() error { return c.releaseAccessEntry(ctx, spec.Name, h) })
		}
	}
	return parallel(jobs...)
}

// releaseAccessEntry removes an entry access_entries no longer declares: one
// it created is deleted; an adopted one keeps existing (EKS or someone made
// it) and loses only the declared policy and the adoption tag.
func (c *Clients) releaseAccessEntry(ctx context.Context, cluster string, h AccessEntry) error {
	if !h.Adopted {
		_, err := c.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(h.PrincipalARN)})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting access entry %s on cluster %s: %w", h.PrincipalARN, cluster, err)
		}
		return nil
	}
	if h.PolicyARN != "" {
		if _, err := c.EKS.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(h.PrincipalARN),
			PolicyArn: aws.String(h.PolicyARN)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("removing %s from access entry %s on cluster %s: %w", h.PolicyARN, h.PrincipalARN, cluster, err)
		}
	}
	got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(h.PrincipalARN)})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("describing access entry %s on cluster %s: %w", h.PrincipalARN, cluster, err)
	}
	if _, err := c.EKS.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: got.AccessEntry.AccessEntryArn, TagKeys: []string{partTag}}); err != nil {
		return fmt.Errorf("untagging access entry %s on cluster %s: %w", h.PrincipalARN, cluster, err)
	}
	return nil
}

// adoptAccessEntry tags an entry that was there before access_entries
// declared it, so it is read back (no perpetual diff) and released, never
// deleted, when no longer declared. A node entry (EC2_LINUX, EC2_WINDOWS:
// EKS makes one for every managed node group's role) is refused untouched:
// EKS never associates an access policy with one (API reference,
// CreateAccessEntry `type`). So is an EC2 entry (EKS Auto Mode's node
// role), whose one access policy is AmazonEKSAutoNodePolicy.
func (c *Clients) adoptAccessEntry(ctx context.Context, spec ClusterSpec, principal string) error {
	got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(principal)})
	if err != nil {
		return fmt.Errorf("describing access entry %s on cluster %s: %w", principal, spec.Name, err)
	}
	if kind := aws.ToString(got.AccessEntry.Type); kind == "EC2" || strings.HasPrefix(kind, "EC2_") {
		return fmt.Errorf("access_entries[%q]: the cluster's access entry for it is a node entry (type %s, which EKS or llmd makes for a node role) and "+
			"its nodes' access is all it may give: remove it from access_entries (its nodes keep their access), or name another principal", principal, kind)
	}
	if part := got.AccessEntry.Tags[partTag]; part == accessEntryPart || part == adoptedEntryPart {
		return nil
	}
	c.adopted(ctx, "EKS access entry", principal)
	if _, err := c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: got.AccessEntry.AccessEntryArn,
		Tags: c.tagSet(spec.Name, spec.Tags, adoptedEntryPart)}); err != nil {
		return fmt.Errorf("tagging access entry %s on cluster %s: %w", principal, spec.Name, err)
	}
	return nil
}

func (c *Clients) putAccessEntry(ctx context.Context, spec ClusterSpec, want AccessEntrySpec) error {
	_, err := c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(want.PrincipalARN),
		Type: aws.String("STANDARD"), Tags: c.tagSet(spec.Name, spec.Tags, accessEntryPart)})
	switch {
	case isCode(err, "ResourceInUseException"):
		if err := c.adoptAccessEntry(ctx, spec, want.PrincipalARN); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("creating access entry for %s (access_entries) on cluster %s: %w", want.PrincipalARN, spec.Name, err)
	}
	scope := &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}
	if len(want.Namespaces) > 0 {
		scope = &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace, Namespaces: want.Namespaces}
	}
	if _, err := c.EKS.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(want.PrincipalARN),
		PolicyArn: aws.String(want.PolicyARN), AccessScope: scope}); err != nil {
		return fmt.Errorf("associating %s with access entry %s on cluster %s: %w", want.PolicyARN, want.PrincipalARN, spec.Name, err)
	}
	pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(want.PrincipalARN)})
	if err != nil {
		return fmt.Errorf("listing access policies of %s on cluster %s: %w", want.PrincipalARN, spec.Name, err)
	}
	for _, p := range pols.AssociatedAccessPolicies {
		if aws.ToString(p.PolicyArn) == want.PolicyARN {
			continue
		}
		if _, err := c.EKS.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: aws.String(spec.Name),
			PrincipalArn: aws.String(want.PrincipalARN), PolicyArn: p.PolicyArn}); err != nil && !isNotFound(err) {
			return fmt.Errorf("removing %s from access entry %s on cluster %s: %w", aws.ToString(p.PolicyArn), want.PrincipalARN, spec.Name, err)
		}
	}
	return nil
}

// FindAdminPrincipal is the principal of the cluster's admin access entry
// (found by its part tag, so whoever imports gets the creator's entry), or
// "" when the cluster has none.
func (c *Clients) FindAdminPrincipal(ctx context.Context, cluster string) (string, error) {
	p := eks.NewListAccessEntriesPaginator(c.EKS, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("listing access entries of EKS cluster %s: %w", cluster, err)
		}
		for _, principal := range page.AccessEntries {
			got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal)})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("describing access entry %s on cluster %s: %w", principal, cluster, err)
			}
			if got.AccessEntry.Tags[partTag] == adminEntryPart {
				return principal, nil
			}
		}
	}
	return "", nil
}
