package awsinfra

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// Tags on a node group's launch template recording its reservation: with
// the On-Demand fallback the template names no reservation (preference
// open), so the read-back finds it here.
const (
	reservationTag = "llmd.dev/capacity-reservation"
	fallbackTag    = "llmd.dev/capacity-fallback"
)

// launchTemplateName is the name of a node group's launch template;
// launch template names are per region, like cluster names.
func launchTemplateName(cluster, nodegroup string) string { return "llmd-" + cluster + "-" + nodegroup }

// launchTemplateData is what a node group on a reservation launches with.
// EKS takes the disk size from the launch template when there is one
// ("Disk size must be specified within the launch template", the EKS API's
// refusal that moto's eks/models.py copies), on the volume the AMI keeps
// containers on: Bottlerocket's data volume /dev/xvdb, the root volume
// /dev/xvda otherwise. The reservation (EC2 API reference,
// CapacityReservationSpecification): a Capacity Block is named as the
// target with market type capacity-block (EKS user guide "Create a managed
// node group with Capacity Blocks for ML"); an On-Demand Capacity
// Reservation without fallback is the target with preference
// capacity-reservations-only ("If capacity isn't available, the instance
// will fail to launch"); with the On-Demand fallback the preference is
// open ("If capacity isn't available, the instance runs as an On-Demand
// Instance"), which only open reservations match (checked at plan time).
func launchTemplateData(ng NodeGroupSpec) *ec2types.RequestLaunchTemplateData {
	device := "/dev/xvda"
	if strings.HasPrefix(ng.AMIType, "BOTTLEROCKET") {
		device = "/dev/xvdb"
	}
	d := &ec2types.RequestLaunchTemplateData{BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String(device),
		Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(ng.DiskSize), VolumeType: ec2types.VolumeTypeGp3, DeleteOnTermination: aws.Bool(true)}}}}
	r := ng.Reservation
	switch {
	case r == nil:
	case r.Block:
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(r.ID)}}
	case r.Fallback == FallbackOnDemand:
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: ec2types.CapacityReservationPreferenceOpen}
	default:
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(r.ID)}}
	}
	return d
}

// ensureLaunchTemplate makes the node group's launch template, or a new
// version of the one an earlier attempt left, and returns the template's
// id and the version to launch with.
func (c *Clients) ensureLaunchTemplate(ctx context.Context, spec ClusterSpec, ng NodeGroupSpec) (*ekstypes.LaunchTemplateSpecification, error) {
	name := launchTemplateName(spec.Name, ng.Name)
	tags := c.tagSet(spec.Name, spec.Tags, "launch-template-"+ng.Name)
	if ng.Reservation != nil {
		tags[reservationTag], tags[fallbackTag] = ng.Reservation.ID, ng.Reservation.Fallback
	}
	data := launchTemplateData(ng)
	have, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil && !isNotFound(err) && !isCode(err, "InvalidLaunchTemplateName.NotFoundException") {
		return nil, fmt.Errorf("describing EC2 launch template %s: %w", name, err)
	}
	if err == nil && len(have.LaunchTemplates) > 0 {
		lt := have.LaunchTemplates[0]
		if owner := fromEC2Tags(lt.Tags)[OwnerTag]; owner != spec.Name {
			return nil, fmt.Errorf("EC2 launch template %s exists but is not owned by cluster %s (tag %s=%q): delete or rename it", name, spec.Name, OwnerTag, owner)
		}
		c.adopted(ctx, "EC2 launch template", name)
		v, err := c.EC2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: lt.LaunchTemplateId, LaunchTemplateData: data})
		if err != nil {
			return nil, fmt.Errorf("creating a version of EC2 launch template %s: %w", name, err)
		}
		if _, err := c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{aws.ToString(lt.LaunchTemplateId)}, Tags: ec2Tags(tags)}); err != nil {
			return nil, fmt.Errorf("tagging EC2 launch template %s: %w", name, err)
		}
		return &ekstypes.LaunchTemplateSpecification{Id: lt.LaunchTemplateId, Version: aws.String(strconv.FormatInt(aws.ToInt64(v.LaunchTemplateVersion.VersionNumber), 10))}, nil
	}
	out, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		VersionDescription: aws.String("llmd node group " + ng.Name), TagSpecifications: ec2TagSpec(ec2types.ResourceTypeLaunchTemplate, tags)})
	if err != nil {
		return nil, fmt.Errorf("creating EC2 launch template %s: %w", name, err)
	}
	return &ekstypes.LaunchTemplateSpecification{Id: out.LaunchTemplate.LaunchTemplateId, Version: aws.String(strconv.FormatInt(aws.ToInt64(out.LaunchTemplate.LatestVersionNumber), 10))}, nil
}

// readLaunchTemplate fills in what a node group launched from its launch
// template reports there rather than on the node group: the disk size and
// the reservation.
func (c *Clients) readLaunchTemplate(ctx context.Context, ng *NodeGroup, ref *ekstypes.LaunchTemplateSpecification) error {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{aws.ToString(ref.Version)}}
	if ref.Id != nil {
		in.LaunchTemplateId = ref.Id
	} else {
		in.LaunchTemplateName = ref.Name
	}
	out, err := c.EC2.DescribeLaunchTemplateVersions(ctx, in)
	if isNotFound(err) || isCode(err, "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("describing launch template of EKS node group %s: %w", ng.Name, err)
	}
	if len(out.LaunchTemplateVersions) == 0 || out.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return nil
	}
	d := out.LaunchTemplateVersions[0].LaunchTemplateData
	for _, b := range d.BlockDeviceMappings {
		if b.Ebs != nil && b.Ebs.VolumeSize != nil {
			ng.DiskSize = aws.ToInt32(b.Ebs.VolumeSize)
		}
	}
	lt, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{aws.ToString(out.LaunchTemplateVersions[0].LaunchTemplateId)}})
	if err != nil {
		return fmt.Errorf("describing launch template of EKS node group %s: %w", ng.Name, err)
	}
	tags := map[string]string{}
	if len(lt.LaunchTemplates) > 0 {
		tags = fromEC2Tags(lt.LaunchTemplates[0].Tags)
	}
	r := &CapacityReservationSpec{ID: tags[reservationTag], Fallback: tags[fallbackTag]}
	if s := d.CapacityReservationSpecification; s != nil && s.CapacityReservationTarget != nil && s.CapacityReservationTarget.CapacityReservationId != nil {
		r.ID = aws.ToString(s.CapacityReservationTarget.CapacityReservationId)
	}
	r.Block = d.InstanceMarketOptions != nil && d.InstanceMarketOptions.MarketType == ec2types.MarketTypeCapacityBlock
	if r.Fallback == "" {
		r.Fallback = FallbackNone
	}
	if r.ID != "" {
		ng.Reservation = r
	}
	return nil
}

// deleteLaunchTemplates deletes the cluster's launch templates; they cost
// nothing but would outlive the cluster.
func (c *Clients) deleteLaunchTemplates(ctx context.Context, owner string) error {
	out, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return fmt.Errorf("listing EC2 launch templates of %s: %w", owner, err)
	}
	for _, lt := range out.LaunchTemplates {
		if _, err := c.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting EC2 launch template %s: %w", aws.ToString(lt.LaunchTemplateName), err)
		}
	}
	return nil
}
