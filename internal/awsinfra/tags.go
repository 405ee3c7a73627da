package awsinfra

import (
	"maps"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// OwnerTag marks every object a cluster resource creates with the cluster's
// name. It is how a later create finds and adopts what a failed one left, and
// how delete and the tests find everything that belongs to a cluster.
const OwnerTag = "llmd.dev/owner"

// partTag tells the parts of one owner apart (vpc, public-us-west-2a, nat, ...),
// so each has a deterministic identity even where AWS names are not unique.
const partTag = "llmd.dev/part"

// regionTag records the region a part belongs to. IAM roles are global, so
// ownership of a role is its owner and its region: two clusters of one name
// in two regions never adopt or delete each other's roles.
const regionTag = "llmd.dev/region"

// tagSet is the tags one part gets: the provider's default tags, beneath the
// resource's own tags, beneath the owner and part tags that must never be
// overridden.
func (c *Clients) tagSet(owner string, userTags map[string]string, part string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, c.DefaultTags)
	maps.Copy(out, userTags)
	out[OwnerTag] = owner
	if c.Config.Region != "" {
		out[regionTag] = c.Config.Region
	}
	if part != "" {
		out[partTag] = part
	}
	return out
}

// UserTags strips what the provider adds (default tags with their default
// value, and bookkeeping tags) from tags read back from AWS, leaving what the
// resource's own tags should hold.
func (c *Clients) UserTags(tags map[string]string) map[string]string {
	out := withoutBookkeeping(tags)
	for k, v := range c.DefaultTags {
		if out[k] == v {
			delete(out, k)
		}
	}
	return out
}

// AllTags is what every part carries besides its bookkeeping tags: default
// tags overridden by the resource's own.
func (c *Clients) AllTags(userTags map[string]string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, c.DefaultTags)
	maps.Copy(out, userTags)
	return out
}

// sdkTags converts tags, sorted by key so requests are deterministic, into a
// service's own tag type.
func sdkTags[T any](tags map[string]string, tag func(k, v *string) T) []T {
	out := make([]T, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, tag(aws.String(k), aws.String(tags[k])))
	}
	return out
}

// tagMap converts a service's tags back into a map.
func tagMap[T any](tags []T, kv func(T) (k, v *string)) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		k, v := kv(t)
		out[aws.ToString(k)] = aws.ToString(v)
	}
	return out
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	return sdkTags(tags, func(k, v *string) ec2types.Tag { return ec2types.Tag{Key: k, Value: v} })
}

func ec2TagSpec(kind ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: kind, Tags: ec2Tags(tags)}}
}

func fromEC2Tags(tags []ec2types.Tag) map[string]string {
	return tagMap(tags, func(t ec2types.Tag) (k, v *string) { return t.Key, t.Value })
}

func iamTags(tags map[string]string) []iamtypes.Tag {
	return sdkTags(tags, func(k, v *string) iamtypes.Tag { return iamtypes.Tag{Key: k, Value: v} })
}

func fromIAMTags(tags []iamtypes.Tag) map[string]string {
	return tagMap(tags, func(t iamtypes.Tag) (k, v *string) { return t.Key, t.Value })
}

// ownerFilters select the EC2 objects of one owner, optionally one part.
func ownerFilters(owner, part string) []ec2types.Filter {
	f := []ec2types.Filter{{Name: aws.String("tag:" + OwnerTag), Values: []string{owner}}}
	if part != "" {
		f = append(f, ec2types.Filter{Name: aws.String("tag:" + partTag), Values: []string{part}})
	}
	return f
}

// tagDiff is what to set and what to remove to turn have into want.
func tagDiff(have, want map[string]string) (set map[string]string, remove []string) {
	set = map[string]string{}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			set[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	return set, remove
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
