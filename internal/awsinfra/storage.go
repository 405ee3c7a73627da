package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/fsx"
	fsxtypes "github.com/aws/aws-sdk-go-v2/service/fsx/types"
)

// Deployment types of FSx for Lustre the cluster offers: SCRATCH_2 holds a
// cache of weights that live elsewhere (HF, S3) at the lowest price;
// PERSISTENT_2 replicates within its zone and takes a throughput tier.
const (
	DeploymentScratch2    = "SCRATCH_2"
	DeploymentPersistent2 = "PERSISTENT_2"
)

// lustrePorts are the inbound TCP ports Lustre clients and servers use (988
// for LNet, 1018-1023 for the client's reserved ports), per the FSx user guide.
var lustrePorts = [][2]int32{{988, 988}, {1018, 1023}}

// persistent2Throughputs are the MB/s per TiB tiers PERSISTENT_2 accepts.
var persistent2Throughputs = []int32{125, 250, 500, 1000}

// StorageSpec is the FSx for Lustre file system holding the model weights.
type StorageSpec struct {
	DeploymentType     string
	StorageCapacityGiB int32
	// PerUnitStorageThroughput is MB/s per TiB, PERSISTENT_2 only (0 for SCRATCH_2).
	PerUnitStorageThroughput int32
	FileSystemTypeVersion    string
	// AvailabilityZone is the file system's zone; empty takes the first private subnet's.
	AvailabilityZone string
	// S3ImportURI, when set (s3://bucket/prefix/), links the file system's root to
	// it through a data repository association.
	S3ImportURI string
	// AutoImport keeps the file system's listing in step with S3 (new, changed and deleted objects).
	AutoImport bool
}

// Storage is what AWS reports about the file system.
type Storage struct {
	StorageSpec
	FileSystemID     string
	DNSName          string
	MountName        string
	SecurityGroupID  string
	SubnetID         string
	Lifecycle        string
	AssociationID    string
	AssociationState string
}

// ValidateStorage checks a storage spec against what FSx accepts for its
// deployment type, naming the attribute and the values allowed.
func ValidateStorage(s StorageSpec) error {
	const p = "model_storage."
	switch s.DeploymentType {
	case DeploymentScratch2:
		if s.PerUnitStorageThroughput != 0 {
			return fmt.Errorf("%sper_unit_storage_throughput: SCRATCH_2 has a fixed throughput (200 MB/s per TiB); remove it, or use deployment_type = \"PERSISTENT_2\"", p)
		}
	case DeploymentPersistent2:
		if !slices.Contains(persistent2Throughputs, s.PerUnitStorageThroughput) {
			return fmt.Errorf("%sper_unit_storage_throughput: PERSISTENT_2 needs one of 125, 250, 500, 1000 (MB/s per TiB), got %d", p, s.PerUnitStorageThroughput)
		}
	default:
		return fmt.Errorf("%sdeployment_type: %q is not offered; use \"SCRATCH_2\" or \"PERSISTENT_2\"", p, s.DeploymentType)
	}
	if c := s.StorageCapacityGiB; c != 1200 && (c < 2400 || c%2400 != 0) {
		return fmt.Errorf("%sstorage_capacity_gib: %s takes 1200, 2400 or a multiple of 2400 GiB, got %d", p, s.DeploymentType, c)
	}
	switch s.FileSystemTypeVersion {
	case "2.12", "2.15":
	default:
		return fmt.Errorf("%sfile_system_type_version: %q is not supported; use \"2.15\" (the client AL2023 ships) or \"2.12\"", p, s.FileSystemTypeVersion)
	}
	if s.S3ImportURI != "" {
		if _, _, err := splitS3URI(s.S3ImportURI); err != nil {
			return fmt.Errorf("%ss3_import.uri: %w", p, err)
		}
	}
	return nil
}

func splitS3URI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("%q is not an S3 URI such as s3://my-bucket/models/", uri)
	}
	return bucket, prefix, nil
}

// StorageReplaced reports whether going from have to want needs a new file
// system: FSx changes neither deployment type, Lustre version nor zone, and
// never shrinks storage. Throughput and capacity increases apply in place.
func StorageReplaced(have, want StorageSpec) bool {
	return have.DeploymentType != want.DeploymentType || have.FileSystemTypeVersion != want.FileSystemTypeVersion ||
		(want.AvailabilityZone != "" && have.AvailabilityZone != want.AvailabilityZone) || want.StorageCapacityGiB < have.StorageCapacityGiB
}

// storageZone is the zone the file system lives in and the private subnet it
// takes there: the spec's zone, else the first private subnet's.
func (c *Clients) storageZone(ctx context.Context, zone string, privateSubnets []string) (az, subnet string, err error) {
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: privateSubnets})
	if err != nil {
		return "", "", fmt.Errorf("describing subnets %v for the file system's zone: %w", privateSubnets, err)
	}
	byZone := map[string]string{}
	for _, sn := range out.Subnets {
		z := aws.ToString(sn.AvailabilityZone)
		if id := aws.ToString(sn.SubnetId); byZone[z] == "" || id < byZone[z] {
			byZone[z] = id
		}
	}
	zones := sortedKeys(byZone)
	if len(zones) == 0 {
		return "", "", fmt.Errorf("no private subnet found for the file system among %v", privateSubnets)
	}
	if zone == "" {
		zone = zones[0]
	}
	if byZone[zone] == "" {
		return "", "", fmt.Errorf("model_storage.availability_zone: the cluster has no private subnet in %s; use one of %s", zone, strings.Join(zones, ", "))
	}
	return zone, byZone[zone], nil
}

// findStorage finds the cluster's file system by its owner tag; nil when there is none.
func (c *Clients) findStorage(ctx context.Context, owner string) (*fsxtypes.FileSystem, error) {
	p := fsx.NewDescribeFileSystemsPaginator(c.FSx, &fsx.DescribeFileSystemsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing FSx file systems for %s: %w", owner, err)
		}
		for _, fs := range page.FileSystems {
			tags := fsxTagMap(fs.Tags)
			if tags[OwnerTag] == owner && tags[regionTag] == c.Config.Region && fs.Lifecycle != fsxtypes.FileSystemLifecycleDeleting {
				return &fs, nil
			}
		}
	}
	return nil, nil
}

func fsxTagMap(tags []fsxtypes.Tag) map[string]string {
	return tagMap(tags, func(t fsxtypes.Tag) (k, v *string) { return t.Key, t.Value })
}

func fsxTags(tags map[string]string) []fsxtypes.Tag {
	return sdkTags(tags, func(k, v *string) fsxtypes.Tag { return fsxtypes.Tag{Key: k, Value: v} })
}

// ensureStorage creates (or adopts) the security group, the file system and
// its data repository association, and waits for each to be AVAILABLE. It
// runs beside the EKS control plane's create, so the two longest waits of a
// cluster overlap.
func (c *Clients) ensureStorage(ctx context.Context, spec ClusterSpec, vpcID, subnet string) error {
	st := spec.Storage
	sg, err := c.ensureStorageSecurityGroup(ctx, spec, vpcID)
	if err != nil {
		return err
	}
	fs, err := c.findStorage(ctx, spec.Name)
	if err != nil {
		return err
	}
	var id string
	if fs != nil && fs.Lifecycle == fsxtypes.FileSystemLifecycleFailed {
		// FAILED does not recover (FSx user guide "File system status"):
		// adopting it would fail every apply again; it holds no weights yet.
		c.logf(ctx, "replacing FSx file system that FSx reports FAILED", map[string]any{"id": aws.ToString(fs.FileSystemId), "reason": failureOf(fs.FailureDetails)})
		if err := c.deleteFileSystem(ctx, aws.ToString(fs.FileSystemId)); err != nil {
			return err
		}
		fs = nil
	}
	if fs != nil {
		id = aws.ToString(fs.FileSystemId)
		c.adopted(ctx, "FSx file system", id)
	} else {
		in := &fsx.CreateFileSystemInput{
			FileSystemType:        fsxtypes.FileSystemTypeLustre,
			StorageCapacity:       aws.Int32(st.StorageCapacityGiB),
			StorageType:           fsxtypes.StorageTypeSsd,
			SubnetIds:             []string{subnet},
			SecurityGroupIds:      []string{sg},
			FileSystemTypeVersion: aws.String(st.FileSystemTypeVersion),
			LustreConfiguration: &fsxtypes.CreateFileSystemLustreConfiguration{DeploymentType: fsxtypes.LustreDeploymentType(st.DeploymentType),
				DataCompressionType: fsxtypes.DataCompressionTypeNone},
			Tags: fsxTags(c.tagSet(spec.Name, spec.Tags, "model-storage")),
		}
		if st.PerUnitStorageThroughput > 0 {
			in.LustreConfiguration.PerUnitStorageThroughput = aws.Int32(st.PerUnitStorageThroughput)
		}
		out, err := c.FSx.CreateFileSystem(ctx, in)
		if err != nil {
			return fmt.Errorf("creating FSx for Lustre file system of %s: %w", spec.Name, err)
		}
		id = aws.ToString(out.FileSystem.FileSystemId)
	}
	if err := c.waitStorage(ctx, id); err != nil {
		return err
	}
	return c.ensureAssociation(ctx, spec, id)
}

// waitStorage waits through CREATING and UPDATING; FAILED and MISCONFIGURED
// end the wait with the reason FSx gives.
func (c *Clients) waitStorage(ctx context.Context, id string) error {
	return c.waitFor(ctx, "FSx file system "+id+" to become AVAILABLE", func(ctx context.Context) error {
		out, err := c.FSx.DescribeFileSystems(ctx, &fsx.DescribeFileSystemsInput{FileSystemIds: []string{id}})
		if isNotFound(err) {
			return pending("not found yet")
		}
		if err != nil {
			return fmt.Errorf("describing FSx file system %s: %w", id, err)
		}
		if len(out.FileSystems) == 0 {
			return pending("not found yet")
		}
		fs := out.FileSystems[0]
		switch fs.Lifecycle {
		case fsxtypes.FileSystemLifecycleAvailable:
			return nil
		case fsxtypes.FileSystemLifecycleCreating, fsxtypes.FileSystemLifecycleUpdating:
			return pending("lifecycle %s", fs.Lifecycle)
		default:
			return fmt.Errorf("FSx file system %s is %s: %s", id, fs.Lifecycle, failureOf(fs.FailureDetails))
		}
	})
}

func failureOf(d *fsxtypes.FileSystemFailureDetails) string {
	if d == nil || aws.ToString(d.Message) == "" {
		return "no reason given"
	}
	return aws.ToString(d.Message)
}

// waitFileSystemUpdate waits for the FILE_SYSTEM_UPDATE administrative
// action an UpdateFileSystem call at began started. The lifecycle alone does
// not tell: FSx queues the change and the file system still reads AVAILABLE
// on the first describe. PENDING and IN_PROGRESS are pending;
// UPDATED_OPTIMIZING (the new values apply while storage rebalances, for
// hours to days) and COMPLETED are done; FAILED ends it with FSx's
// FailureDetails (terraform-provider-aws fsx/lustre_file_system.go
// waitFileSystemAdministrativeActionCompleted).
func (c *Clients) waitFileSystemUpdate(ctx context.Context, id string, began time.Time) error {
	return c.waitFor(ctx, "FSx file system "+id+" update (administrative action FILE_SYSTEM_UPDATE) to apply", func(ctx context.Context) error {
		out, err := c.FSx.DescribeFileSystems(ctx, &fsx.DescribeFileSystemsInput{FileSystemIds: []string{id}})
		if err != nil {
			return fmt.Errorf("describing FSx file system %s: %w", id, err)
		}
		if len(out.FileSystems) == 0 {
			return fmt.Errorf("FSx file system %s is gone", id)
		}
		var latest *fsxtypes.AdministrativeAction
		for i, a := range out.FileSystems[0].AdministrativeActions {
			// Allow for clock skew between this machine and FSx.
			if a.AdministrativeActionType != fsxtypes.AdministrativeActionTypeFileSystemUpdate || aws.ToTime(a.RequestTime).Before(began.Add(-time.Minute)) {
				continue
			}
			if latest == nil || !aws.ToTime(a.RequestTime).Before(aws.ToTime(latest.RequestTime)) {
				latest = &out.FileSystems[0].AdministrativeActions[i]
			}
		}
		if latest == nil {
			return pending("no FILE_SYSTEM_UPDATE action listed yet")
		}
		switch latest.Status {
		case fsxtypes.StatusCompleted, fsxtypes.StatusUpdatedOptimizing:
			return nil
		case fsxtypes.StatusFailed:
			reason := "no reason given"
			if latest.FailureDetails != nil && aws.ToString(latest.FailureDetails.Message) != "" {
				reason = aws.ToString(latest.FailureDetails.Message)
			}
			return fmt.Errorf("FSx could not update file system %s: %s", id, reason)
		default:
			return pending("administrative action %s, lifecycle %s", latest.Status, out.FileSystems[0].Lifecycle)
		}
	})
}

// ensureStorageSecurityGroup finds or creates the file system's security
// group with Lustre's ports open from itself, which FSx requires at create;
// the cluster security group is admitted once EKS has made it.
func (c *Clients) ensureStorageSecurityGroup(ctx context.Context, spec ClusterSpec, vpcID string) (string, error) {
	out, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: append(ownerFilters(spec.Name, "model-storage"),
		ec2Filter("vpc-id", vpcID))})
	if err != nil {
		return "", fmt.Errorf("finding the file system's security group of %s: %w", spec.Name, err)
	}
	var id string
	if len(out.SecurityGroups) > 0 {
		id = aws.ToString(out.SecurityGroups[0].GroupId)
		c.adopted(ctx, "security group", id)
	} else {
		tags := c.tagSet(spec.Name, spec.Tags, "model-storage")
		tags["Name"] = spec.Name + "-model-storage"
		created, err := c.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(spec.Name + "-model-storage"), VpcId: aws.String(vpcID),
			Description:       aws.String("FSx for Lustre of llmd cluster " + spec.Name + ": Lustre ports from itself and the cluster"),
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeSecurityGroup, tags)})
		if err != nil {
			return "", fmt.Errorf("creating the file system's security group of %s: %w", spec.Name, err)
		}
		id = aws.ToString(created.GroupId)
	}
	return id, c.allowLustreFrom(ctx, id, id)
}

func ec2Filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// allowLustreFrom opens Lustre's ports on sg to members of source; rules
// already there (an adopted group) are left as they are.
func (c *Clients) allowLustreFrom(ctx context.Context, sg, source string) error {
	have, err := c.lustreRules(ctx, sg)
	if err != nil {
		return err
	}
	var perms []ec2types.IpPermission
	for _, ports := range lustrePorts {
		if !have[ruleKey(source, ports)] {
			perms = append(perms, ec2types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(ports[0]), ToPort: aws.Int32(ports[1]),
				UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(source)}}})
		}
	}
	if len(perms) == 0 {
		return nil
	}
	if _, err := c.EC2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(sg), IpPermissions: perms}); err != nil &&
		!isCode(err, "InvalidPermission.Duplicate") {
		return fmt.Errorf("opening Lustre ports on security group %s to %s: %w", sg, source, err)
	}
	return nil
}

func ruleKey(source string, ports [2]int32) string {
	return fmt.Sprintf("%s:%d-%d", source, ports[0], ports[1])
}

// lustreRules are the inbound TCP rules of sg keyed by source group and port range.
func (c *Clients) lustreRules(ctx context.Context, sg string) (map[string]bool, error) {
	out, err := c.EC2.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{ec2Filter("group-id", sg)}})
	if err != nil {
		return nil, fmt.Errorf("reading rules of security group %s: %w", sg, err)
	}
	have := map[string]bool{}
	for _, r := range out.SecurityGroupRules {
		if aws.ToBool(r.IsEgress) || r.ReferencedGroupInfo == nil || aws.ToString(r.IpProtocol) != "tcp" {
			continue
		}
		have[ruleKey(aws.ToString(r.ReferencedGroupInfo.GroupId), [2]int32{aws.ToInt32(r.FromPort), aws.ToInt32(r.ToPort)})] = true
	}
	return have, nil
}

// findStorageState reads the file system back with its group and association.
func (c *Clients) findStorageState(ctx context.Context, owner string) (*Storage, error) {
	fs, err := c.findStorage(ctx, owner)
	if err != nil || fs == nil {
		return nil, err
	}
	out := &Storage{FileSystemID: aws.ToString(fs.FileSystemId), DNSName: aws.ToString(fs.DNSName), Lifecycle: string(fs.Lifecycle)}
	out.StorageCapacityGiB = aws.ToInt32(fs.StorageCapacity)
	out.FileSystemTypeVersion = aws.ToString(fs.FileSystemTypeVersion)
	if len(fs.SubnetIds) > 0 {
		out.SubnetID = fs.SubnetIds[0]
	}
	if lc := fs.LustreConfiguration; lc != nil {
		out.DeploymentType = string(lc.DeploymentType)
		out.PerUnitStorageThroughput = aws.ToInt32(lc.PerUnitStorageThroughput)
		out.MountName = aws.ToString(lc.MountName)
	}
	err = parallel(
		func() error {
			if out.SubnetID == "" {
				return nil
			}
			sn, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{out.SubnetID}})
			if err != nil {
				return fmt.Errorf("describing subnet %s of file system %s: %w", out.SubnetID, out.FileSystemID, err)
			}
			if len(sn.Subnets) > 0 {
				out.AvailabilityZone = aws.ToString(sn.Subnets[0].AvailabilityZone)
			}
			return nil
		},
		func() error {
			sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: ownerFilters(owner, "model-storage")})
			if err != nil {
				return fmt.Errorf("finding the file system's security group of %s: %w", owner, err)
			}
			if len(sgs.SecurityGroups) > 0 {
				out.SecurityGroupID = aws.ToString(sgs.SecurityGroups[0].GroupId)
			}
			return nil
		},
		func() error {
			dra, err := c.findAssociation(ctx, out.FileSystemID)
			if err != nil || dra == nil {
				return err
			}
			out.AssociationID, out.AssociationState = aws.ToString(dra.AssociationId), string(dra.Lifecycle)
			out.S3ImportURI = aws.ToString(dra.DataRepositoryPath)
			out.AutoImport = dra.S3 != nil && dra.S3.AutoImportPolicy != nil && len(dra.S3.AutoImportPolicy.Events) > 0
			return nil
		},
	)
	return out, err
}

// updateStorage applies what FSx changes in place (capacity increase,
// PERSISTENT_2 throughput, the S3 link), or replaces the file system when
// the spec needs a new one; the provider's plan has already refused that
// while deletion protection is on.
func (c *Clients) updateStorage(ctx context.Context, spec ClusterSpec, have *Storage, vpcID string, privateSubnets []string, clusterSG string) error {
	want := spec.Storage
	if want == nil {
		if have != nil {
			return c.deleteStorage(ctx, spec.Name)
		}
		return nil
	}
	if have != nil && StorageReplaced(have.StorageSpec, *want) {
		if err := c.deleteStorage(ctx, spec.Name); err != nil {
			return err
		}
		have = nil
	}
	if have == nil {
		_, subnet, err := c.storageZone(ctx, want.AvailabilityZone, privateSubnets)
		if err != nil {
			return err
		}
		if err := c.ensureStorage(ctx, spec, vpcID, subnet); err != nil {
			return err
		}
		return c.admitCluster(ctx, spec.Name, clusterSG)
	}
	in := &fsx.UpdateFileSystemInput{FileSystemId: aws.String(have.FileSystemID)}
	changed := false
	if want.StorageCapacityGiB > have.StorageCapacityGiB {
		in.StorageCapacity, changed = aws.Int32(want.StorageCapacityGiB), true
	}
	if want.PerUnitStorageThroughput != have.PerUnitStorageThroughput && want.PerUnitStorageThroughput > 0 {
		in.LustreConfiguration = &fsxtypes.UpdateFileSystemLustreConfiguration{PerUnitStorageThroughput: aws.Int32(want.PerUnitStorageThroughput)}
		changed = true
	}
	if changed {
		began := time.Now()
		if _, err := c.FSx.UpdateFileSystem(ctx, in); err != nil {
			return fmt.Errorf("updating FSx file system %s: %w", have.FileSystemID, err)
		}
		if err := c.waitFileSystemUpdate(ctx, have.FileSystemID, began); err != nil {
			return err
		}
	}
	if have.AssociationID != "" && (want.S3ImportURI != have.S3ImportURI || want.AutoImport != have.AutoImport) {
		if err := c.deleteAssociation(ctx, have.AssociationID); err != nil {
			return err
		}
	}
	if err := c.ensureAssociation(ctx, spec, have.FileSystemID); err != nil {
		return err
	}
	return c.admitCluster(ctx, spec.Name, clusterSG)
}

// admitCluster opens the file system's Lustre ports to the cluster security
// group, which exists only once EKS has created the control plane. Where the
// API reports no cluster group there is nothing to admit.
func (c *Clients) admitCluster(ctx context.Context, owner, clusterSG string) error {
	if clusterSG == "" {
		c.logf(ctx, "EKS reports no cluster security group; the file system admits only its own group", map[string]any{"owner": owner})
		return nil
	}
	sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: ownerFilters(owner, "model-storage")})
	if err != nil {
		return fmt.Errorf("finding the file system's security group of %s: %w", owner, err)
	}
	for _, sg := range sgs.SecurityGroups {
		if err := c.allowLustreFrom(ctx, aws.ToString(sg.GroupId), clusterSG); err != nil {
			return err
		}
	}
	return nil
}

// deleteStorage deletes the file system (its associations go with it) and
// waits until it is gone, then its security group, which FSx's network
// interfaces hold for a while after.
func (c *Clients) deleteStorage(ctx context.Context, owner string) error {
	fs, err := c.findStorage(ctx, owner)
	if err != nil {
		return err
	}
	if fs != nil {
		if err := c.deleteFileSystem(ctx, aws.ToString(fs.FileSystemId)); err != nil {
			return fmt.Errorf("deleting FSx file system of %s: %w", owner, err)
		}
	}
	sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: ownerFilters(owner, "model-storage")})
	if err != nil {
		return fmt.Errorf("finding the file system's security group of %s: %w", owner, err)
	}
	for _, sg := range sgs.SecurityGroups {
		id := sg.GroupId
		if err := c.deleteRetrying(ctx, "security group "+aws.ToString(id), func(ctx context.Context) error {
			_, err := c.EC2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteFileSystem deletes a file system (its associations go with it) and
// waits until it is gone. Right after the call it can still read its old
// lifecycle (AVAILABLE, FAILED), pending for settleLimit, then DELETING.
func (c *Clients) deleteFileSystem(ctx context.Context, id string) error {
	began := time.Now()
	if _, err := c.FSx.DeleteFileSystem(ctx, &fsx.DeleteFileSystemInput{FileSystemId: aws.String(id)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting FSx file system %s: %w", id, err)
	}
	return c.waitFor(ctx, "FSx file system "+id+" to be deleted", func(ctx context.Context) error {
		out, err := c.FSx.DescribeFileSystems(ctx, &fsx.DescribeFileSystemsInput{FileSystemIds: []string{id}})
		if isNotFound(err) || (err == nil && len(out.FileSystems) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("describing FSx file system %s: %w", id, err)
		}
		if lc := out.FileSystems[0].Lifecycle; lc != fsxtypes.FileSystemLifecycleDeleting && !settling(began) {
			return fmt.Errorf("FSx file system %s is %s while being deleted", id, lc)
		}
		return pending("lifecycle %s", out.FileSystems[0].Lifecycle)
	})
}

// syncStorageTags brings the file system's tags to the default tags plus the
// resource's tags.
func (c *Clients) syncStorageTags(ctx context.Context, spec ClusterSpec) error {
	fs, err := c.findStorage(ctx, spec.Name)
	if err != nil || fs == nil {
		return err
	}
	arn := fs.ResourceARN
	set, remove := tagDiff(withoutBookkeeping(fsxTagMap(fs.Tags)), c.AllTags(spec.Tags))
	if len(set) > 0 {
		if _, err := c.FSx.TagResource(ctx, &fsx.TagResourceInput{ResourceARN: arn, Tags: fsxTags(set)}); err != nil {
			return fmt.Errorf("tagging FSx file system %s: %w", aws.ToString(fs.FileSystemId), err)
		}
	}
	if len(remove) > 0 {
		if _, err := c.FSx.UntagResource(ctx, &fsx.UntagResourceInput{ResourceARN: arn, TagKeys: remove}); err != nil {
			return fmt.Errorf("untagging FSx file system %s: %w", aws.ToString(fs.FileSystemId), err)
		}
	}
	return nil
}
