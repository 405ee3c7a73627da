package awsinfra

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ModelBucketSpec is the S3 bucket the vLLM pods stream the weights from.
type ModelBucketSpec struct {
	// Name is an existing bucket, used as it is: never created, deleted,
	// emptied or changed. Empty: the cluster creates the bucket ModelBucketName names.
	Name string
}

// ModelBucket is what AWS reports about the bucket and the VPC's S3 gateway endpoint.
type ModelBucket struct {
	// Name is empty when the bucket is gone.
	Name   string
	ARN    string
	Region string
	// Created reports whether the bucket carries the cluster's owner tag.
	Created bool
	// GatewayEndpointID is the S3 gateway endpoint serving the nodes' route
	// tables, the cluster's own or one already there; empty when there is none.
	GatewayEndpointID string
}

// ModelBucketName is the name of the bucket a cluster called cluster
// creates in region for account. S3 bucket names are global across every
// account (S3 user guide "General purpose bucket naming rules"), so the
// name carries the region and a hash of account, cluster and region: two
// clusters of one name in two regions or accounts never meet. The rules:
// 3 to 63 characters, lowercase letters, digits and hyphens, a letter or
// digit at each end. A long cluster name is cut to fit; the hash keeps the
// name its own.
func ModelBucketName(account, cluster, region string) string {
	sum := sha256.Sum256([]byte(account + "/" + cluster + "/" + region))
	suffix := "-" + region + "-" + hex.EncodeToString(sum[:4])
	const prefix, limit = "llmd-", 63
	name := strings.ToLower(cluster)
	if room := limit - len(prefix) - len(suffix); len(name) > room {
		name = name[:max(room, 0)]
	}
	name = strings.TrimRight(name, "-")
	if name == "" {
		return strings.TrimSuffix(prefix, "-") + suffix
	}
	return prefix + name + suffix
}

// createdBucketName is the name of the bucket the cluster creates, for the
// credentials' account.
func (c *Clients) createdBucketName(ctx context.Context, cluster string) (string, error) {
	out, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("calling STS GetCallerIdentity for the model bucket's name: %w", err)
	}
	return ModelBucketName(aws.ToString(out.Account), cluster, c.Config.Region), nil
}

// PlannedModelBucket is the bucket a plan can name: the given one, or the
// one the cluster creates; one STS call for the latter.
func (c *Clients) PlannedModelBucket(ctx context.Context, cluster string, spec ModelBucketSpec) (name, arn string, err error) {
	name = spec.Name
	if name == "" {
		if name, err = c.createdBucketName(ctx, cluster); err != nil {
			return "", "", err
		}
	}
	return name, BucketARN(c.Config.Region, name), nil
}

// BucketARN is the ARN of a bucket in the region's partition. Bucket ARNs
// hold neither region nor account (S3 user guide "Amazon S3 resources"),
// only the partition, which the region's name gives (the SDK's
// partitions.json regionRegex), so a refresh needs no STS call for it.
func BucketARN(region, bucket string) string {
	partition := "aws"
	for prefix, p := range map[string]string{"cn-": "aws-cn", "us-gov-": "aws-us-gov", "us-iso-": "aws-iso", "us-isob-": "aws-iso-b",
		"eu-isoe-": "aws-iso-e", "us-isof-": "aws-iso-f", "eusc-": "aws-eusc"} {
		if strings.HasPrefix(region, prefix) {
			partition = p
		}
	}
	return "arn:" + partition + ":s3:::" + bucket
}

// The created bucket's settings, each S3's documented private default set
// explicitly, since an adopted bucket or an older partition may lack it:
//   - S3 Block Public Access, all four settings on (S3 user guide "Blocking
//     public access to your Amazon S3 storage"; on by default for new
//     buckets since April 2023);
//   - Object Ownership BucketOwnerEnforced: ACLs off, the bucket owner owns
//     every object, which the staging Job writes under its own role (S3 user
//     guide "Controlling ownership of objects and disabling ACLs for your
//     bucket");
//   - default encryption SSE-S3, AES256 (S3 user guide "Setting default
//     server-side encryption behavior for Amazon S3 buckets"; applied to new
//     objects by default since January 2023);
//   - a bucket policy denying any request not made over TLS, the condition
//     aws:SecureTransport false (S3 user guide "Security best practices for
//     Amazon S3", enforce encryption of data in transit; AWS Security Hub
//     control S3.5).
const denyInsecureTransport = `{"Version":"2012-10-17","Statement":[{"Sid":"DenyInsecureTransport","Effect":"Deny","Principal":"*","Action":"s3:*",` +
	`"Resource":["%[1]s","%[1]s/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`

// ensureModelBucket checks a given bucket, or finds or creates the
// cluster's own with its private settings.
func (c *Clients) ensureModelBucket(ctx context.Context, spec ClusterSpec) error {
	if spec.ModelBucket == nil {
		return nil
	}
	if spec.ModelBucket.Name != "" {
		return c.checkGivenBucket(ctx, spec.ModelBucket.Name)
	}
	name, err := c.createdBucketName(ctx, spec.Name)
	if err != nil {
		return err
	}
	tags, owned, exists, err := c.findCreatedBucket(ctx, spec.Name, name)
	switch {
	case err != nil:
		return err
	case exists && !owned && tags == nil:
		// Unreadable: CreateBucket tells whose it is.
		if err := c.createBucket(ctx, spec, name); err != nil {
			return err
		}
	case exists && !owned:
		return fmt.Errorf("S3 bucket %s exists but is not owned by cluster %s in %s (no %s tag): delete it, or set model_bucket.name to use it as it is",
			name, spec.Name, c.Config.Region, OwnerTag)
	case exists:
		c.adopted(ctx, "S3 bucket", name)
	default:
		if err := c.createBucket(ctx, spec, name); err != nil {
			return err
		}
	}
	return c.privateBucket(ctx, name)
}

// createBucket creates the bucket with its tags in one call, so a bucket
// never exists without the owner tag that lets the next apply adopt it
// (CreateBucketConfiguration.Tags; it needs s3:TagResource as well as
// s3:CreateBucket).
func (c *Clients) createBucket(ctx context.Context, spec ClusterSpec, name string) error {
	conf := &s3types.CreateBucketConfiguration{Tags: s3Tags(c.tagSet(spec.Name, spec.Tags, "model-bucket"))}
	// us-east-1 takes no location constraint (S3 API reference CreateBucket).
	if c.Config.Region != "us-east-1" {
		conf.LocationConstraint = s3types.BucketLocationConstraint(c.Config.Region)
	}
	_, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name), CreateBucketConfiguration: conf,
		ObjectOwnership: s3types.ObjectOwnershipBucketOwnerEnforced})
	switch {
	case err == nil:
		return nil
	case isCode(err, "BucketAlreadyExists"):
		return fmt.Errorf("creating S3 bucket %s for cluster %s: the name is taken by another AWS account (bucket names are global); "+
			"set model_bucket.name to a bucket of yours: %w", name, spec.Name, err)
	case isCode(err, "BucketAlreadyOwnedByYou"):
		return fmt.Errorf("creating S3 bucket %s for cluster %s: the account has it already, but its tags cannot be read (s3:GetBucketTagging) "+
			"to tell whether the cluster made it; grant that, or set model_bucket.name to use it as it is: %w", name, spec.Name, err)
	default:
		return fmt.Errorf("creating S3 bucket %s for cluster %s: %w", name, spec.Name, err)
	}
}

// privateBucket applies the created bucket's settings; each call replaces
// the setting whole, so an adopted bucket is brought back to them.
func (c *Clients) privateBucket(ctx context.Context, name string) error {
	on := aws.Bool(true)
	steps := []struct {
		what string
		call func() error
	}{
		{"blocking public access to", func() error {
			_, err := c.S3.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(name),
				PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{BlockPublicAcls: on, IgnorePublicAcls: on, BlockPublicPolicy: on, RestrictPublicBuckets: on}})
			return err
		}},
		{"enforcing bucket-owner object ownership on", func() error {
			_, err := c.S3.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: aws.String(name),
				OwnershipControls: &s3types.OwnershipControls{Rules: []s3types.OwnershipControlsRule{{ObjectOwnership: s3types.ObjectOwnershipBucketOwnerEnforced}}}})
			return err
		}},
		{"setting default encryption SSE-S3 on", func() error {
			_, err := c.S3.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String(name),
				ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{{
					ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAes256}}}}})
			return err
		}},
		{"denying requests without TLS to", func() error {
			_, err := c.S3.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(name),
				Policy: aws.String(fmt.Sprintf(denyInsecureTransport, BucketARN(c.Config.Region, name)))})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			return fmt.Errorf("%s S3 bucket %s: %w", s.what, name, err)
		}
	}
	return nil
}

// checkGivenBucket checks that model_bucket.name exists, can be reached
// with the provider's credentials, and is in the provider's region: the
// VPC's gateway endpoint serves buckets of its own region only (AWS
// PrivateLink guide "Gateway endpoints for Amazon S3"), and a bucket
// elsewhere would be read across regions through the NAT gateway.
func (c *Clients) checkGivenBucket(ctx context.Context, name string) error {
	region, err := c.bucketRegion(ctx, name)
	switch {
	case isCode(err, "NotFound", "NoSuchBucket"):
		return fmt.Errorf("model_bucket.name: S3 bucket %s does not exist; create it first or leave model_bucket.name unset for the cluster to create one", name)
	case isCode(err, "Forbidden", "AccessDenied"):
		return fmt.Errorf("model_bucket.name: S3 bucket %s cannot be read with the provider's credentials (s3:ListBucket): %w", name, err)
	case err != nil:
		return fmt.Errorf("model_bucket.name: checking S3 bucket %s: %w", name, err)
	case region != c.Config.Region:
		return fmt.Errorf("model_bucket.name: S3 bucket %s is in %s, not the provider's region %s: the S3 gateway endpoint serves buckets of its own region only; "+
			"use a bucket in %s", name, region, c.Config.Region, c.Config.Region)
	}
	return nil
}

// bucketRegion is the region of a bucket by HeadBucket: its
// x-amz-bucket-region header, which S3 also sends with the 301 it answers
// for a bucket of another region (S3 API reference HeadBucket).
func (c *Clients) bucketRegion(ctx context.Context, name string) (string, error) {
	out, err := c.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)})
	if err == nil {
		return aws.ToString(out.BucketRegion), nil
	}
	if region := redirectRegion(err); region != "" {
		return region, nil
	}
	return "", err
}

// redirectRegion is the region S3 names in a 301 PermanentRedirect, "" for any other error.
func redirectRegion(err error) string {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusMovedPermanently {
		return re.Response.Header.Get("x-amz-bucket-region")
	}
	return ""
}

// findCreatedBucket reads the tags of the bucket the cluster creates: one
// call tells whether it exists and whether it is the cluster's (owned). A
// bucket of that name without tags exists but is not owned; one whose tags
// cannot be read (another account's: AccessDenied; another region's: 301)
// exists, is not owned, and has nil tags. What the cluster cannot prove
// its own, it never deletes.
func (c *Clients) findCreatedBucket(ctx context.Context, owner, name string) (tags map[string]string, owned, exists bool, err error) {
	out, err := c.S3.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(name)})
	switch {
	case isCode(err, "NoSuchBucket"):
		return nil, false, false, nil
	case isCode(err, "NoSuchTagSet"):
		return map[string]string{}, false, true, nil
	case isCode(err, "AccessDenied", "Forbidden") || (err != nil && redirectRegion(err) != ""):
		return nil, false, true, nil
	case err != nil:
		return nil, false, false, fmt.Errorf("reading tags of S3 bucket %s: %w", name, err)
	}
	tags = tagMap(out.TagSet, func(t s3types.Tag) (k, v *string) { return t.Key, t.Value })
	return tags, tags[OwnerTag] == owner && tags[regionTag] == c.Config.Region, true, nil
}

func s3Tags(tags map[string]string) []s3types.Tag {
	return sdkTags(tags, func(k, v *string) s3types.Tag { return s3types.Tag{Key: k, Value: v} })
}

// FindModelBucket reads the bucket and the gateway endpoint back: created
// reports a bucket the cluster made (read by its tags), else a given one
// (HeadBucket). Two calls, and no listing of objects.
func (c *Clients) FindModelBucket(ctx context.Context, owner, bucket string, created bool, vpcID string) (*ModelBucket, error) {
	out := &ModelBucket{}
	err := parallel(
		func() error {
			if bucket == "" {
				return nil
			}
			if created {
				_, owned, _, err := c.findCreatedBucket(ctx, owner, bucket)
				if err != nil || !owned {
					return err
				}
				out.Name, out.Region, out.Created = bucket, c.Config.Region, true
			} else {
				region, err := c.bucketRegion(ctx, bucket)
				if isCode(err, "NotFound", "NoSuchBucket") {
					return nil
				}
				if err != nil {
					return fmt.Errorf("reading S3 bucket %s (model_bucket.name): %w", bucket, err)
				}
				out.Name, out.Region = bucket, region
			}
			out.ARN = BucketARN(c.Config.Region, bucket)
			return nil
		},
		func() (err error) {
			out.GatewayEndpointID, err = c.findGatewayEndpointID(ctx, owner, vpcID)
			return err
		},
	)
	return out, err
}

// findModelBucketOf reads back the spec's bucket, nil when it has none.
func (c *Clients) findModelBucketOf(ctx context.Context, spec ClusterSpec, vpcID string) (*ModelBucket, error) {
	if spec.ModelBucket == nil {
		return nil, nil
	}
	name, created := spec.ModelBucket.Name, spec.ModelBucket.Name == ""
	if created {
		var err error
		if name, err = c.createdBucketName(ctx, spec.Name); err != nil {
			return nil, err
		}
	}
	return c.FindModelBucket(ctx, spec.Name, name, created, vpcID)
}

// maxCounted bounds how many object versions a count lists (a hundred
// pages), so a plan against a huge bucket stays quick; beyond it the count
// says "more than".
const maxCounted = 100_000

// CountBucketObjects counts the object versions and delete markers of a
// bucket, up to maxCounted: what a delete must remove first (S3 refuses to
// delete a bucket holding any, BucketNotEmpty). more reports the count stopped.
func (c *Clients) CountBucketObjects(ctx context.Context, bucket string) (n int, more bool, err error) {
	p := s3.NewListObjectVersionsPaginator(c.S3, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, false, fmt.Errorf("listing object versions of S3 bucket %s: %w", bucket, err)
		}
		n += len(page.Versions) + len(page.DeleteMarkers)
		if n >= maxCounted {
			return n, p.HasMorePages(), nil
		}
	}
	return n, false, nil
}

// ObjectCount says how many objects a count found.
func ObjectCount(n int, more bool) string {
	if more {
		return fmt.Sprintf("more than %d object versions", n)
	}
	return fmt.Sprintf("%d object versions", n)
}

// checkCreatedBucketDeletable stops a delete of the created bucket while it
// holds objects and force is off, before anything else is deleted.
func (c *Clients) checkCreatedBucketDeletable(ctx context.Context, owner string, force bool) (bucket string, err error) {
	name, err := c.createdBucketName(ctx, owner)
	if err != nil {
		return "", err
	}
	_, owned, _, err := c.findCreatedBucket(ctx, owner, name)
	if err != nil || !owned {
		return "", err
	}
	if force {
		return name, nil
	}
	n, more, err := c.CountBucketObjects(ctx, name)
	if err != nil {
		return name, err
	}
	if n > 0 {
		return name, fmt.Errorf("S3 bucket %s of cluster %s holds %s (the model weights); model_bucket.force_destroy is false, so it is not emptied. "+
			"Set model_bucket.force_destroy = true and apply, then run this again; or move the objects out first", name, owner, ObjectCount(n, more))
	}
	return name, nil
}

// deleteCreatedBucket deletes the bucket the cluster created (found by its
// name and owner tag), emptying it first when force is on. Objects written
// meanwhile (a staging Job still running) make S3 answer BucketNotEmpty;
// with force the bucket is emptied again until it goes.
func (c *Clients) deleteCreatedBucket(ctx context.Context, owner string, force bool) error {
	name, err := c.checkCreatedBucketDeletable(ctx, owner, force)
	if err != nil || name == "" {
		return err
	}
	return c.waitFor(ctx, "S3 bucket "+name+" to be deleted", func(ctx context.Context) error {
		if force {
			if err := c.emptyBucket(ctx, name); err != nil {
				return err
			}
		}
		_, err := c.S3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
		switch {
		case err == nil || isCode(err, "NoSuchBucket"):
			return nil
		case isCode(err, "BucketNotEmpty") && force:
			return pending("objects were written while it was emptied")
		case isCode(err, "BucketNotEmpty"):
			return fmt.Errorf("S3 bucket %s of cluster %s received objects during the delete and model_bucket.force_destroy is false: %w", name, owner, err)
		default:
			return fmt.Errorf("deleting S3 bucket %s: %w", name, err)
		}
	})
}

// emptyBucket deletes every object version and delete marker, a page
// (at most 1000, DeleteObjects' limit) at a time.
func (c *Clients) emptyBucket(ctx context.Context, name string) error {
	for {
		page, err := c.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(name), MaxKeys: aws.Int32(1000)})
		if err != nil {
			return fmt.Errorf("listing object versions of S3 bucket %s: %w", name, err)
		}
		var ids []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			ids = append(ids, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			return nil
		}
		out, err := c.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(name), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return fmt.Errorf("deleting objects of S3 bucket %s: %w", name, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("deleting objects of S3 bucket %s: %d failed, first %s: %s %s", name, len(out.Errors), aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
}

// syncBucketTags brings the created bucket's tags to the default tags plus
// the resource's tags; PutBucketTagging replaces the whole set, so the
// bookkeeping tags are written with them.
func (c *Clients) syncBucketTags(ctx context.Context, spec ClusterSpec) error {
	if spec.ModelBucket == nil || spec.ModelBucket.Name != "" {
		return nil
	}
	name, err := c.createdBucketName(ctx, spec.Name)
	if err != nil {
		return err
	}
	have, _, _, err := c.findCreatedBucket(ctx, spec.Name, name)
	if err != nil {
		return err
	}
	want := c.tagSet(spec.Name, spec.Tags, "model-bucket")
	if set, remove := tagDiff(have, want); len(set) == 0 && len(remove) == 0 {
		return nil
	}
	if _, err := c.S3.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(name), Tagging: &s3types.Tagging{TagSet: s3Tags(want)}}); err != nil {
		return fmt.Errorf("tagging S3 bucket %s: %w", name, err)
	}
	return nil
}
