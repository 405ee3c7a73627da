package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
)

// Service Quotas codes for the vCPUs of G and VT instances (the GPU families
// EKS GPU AMIs run on), on-demand and spot.
const (
	QuotaGAndVTOnDemand = "L-DB2E81BA"
	QuotaGAndVTSpot     = "L-3819A6DF"
)

// defaultZoneCount is how many zones a created network spans when none are given.
const defaultZoneCount = 3

// PreflightInput is what the preflight checks look at.
type PreflightInput struct {
	KubernetesVersion string
	GPU               NodeGroupSpec
	System            NodeGroupSpec
	// Network decides which zones the instance types must be offered in.
	Network NetworkSpec
	// Upgrade is a Kubernetes version change of an existing cluster: its
	// node groups surge extra instances while they roll.
	Upgrade bool
	// StorageZone is the file system's zone, where colocated GPU nodes go;
	// "" for none or not yet known (with StorageOn: the first of the
	// cluster's zones, which the file system takes by default).
	StorageZone string
	StorageOn   bool
	// Karpenter makes the GPU nodes (up to GPU.MaxSize) instead of the GPU
	// node group: a reservation is tried first for each node it launches.
	Karpenter bool
	// AutoMode: EKS Auto Mode makes the GPU nodes from a NodePool, as
	// Karpenter does, for the reservation checks.
	AutoMode bool
}

// Finding is one failed check: the configuration field at fault and a message naming the fix.
type Finding struct {
	Field   string
	Message string
}

// PreflightResult lists failed checks and checks skipped because the API did not answer.
type PreflightResult struct {
	Findings []Finding
	Skipped  []string
	// Warnings are what will happen that the user may not expect: a
	// reservation too small for the node group, falling back to On-Demand.
	Warnings []Finding
	// CapacityReservationID is the reservation the GPU node group's
	// selection resolved to; "" without one.
	CapacityReservationID string
}

// Preflight checks, before anything is created, what would otherwise fail
// half an hour into an apply: a GPU instance type offered in the zones, the
// G and VT vCPU quota for the node group's maximum, and the Kubernetes version.
func (c *Clients) Preflight(ctx context.Context, in PreflightInput) (PreflightResult, error) {
	var res PreflightResult
	types, err := c.instanceTypes(ctx, in.GPU.InstanceType, in.System.InstanceType)
	if err != nil {
		return res, err
	}
	gpu, ok := types[in.GPU.InstanceType]
	switch {
	case !ok:
		res.Findings = append(res.Findings, Finding{"gpu_node_group.instance_type", fmt.Sprintf("%q is not an EC2 instance type in %s; use a GPU type such as g5.xlarge", in.GPU.InstanceType, c.Config.Region)})
	case gpu.GpuInfo == nil || len(gpu.GpuInfo.Gpus) == 0:
		res.Findings = append(res.Findings, Finding{"gpu_node_group.instance_type", fmt.Sprintf("%q has no GPU; use a GPU instance type such as g5.xlarge (NVIDIA A10G) or g6.xlarge (L4)", in.GPU.InstanceType)})
	}
	if _, ok := types[in.System.InstanceType]; !ok {
		res.Findings = append(res.Findings, Finding{"system_node_group.instance_type", fmt.Sprintf("%q is not an EC2 instance type in %s; use e.g. m6i.4xlarge", in.System.InstanceType, c.Config.Region)})
	}
	if len(res.Findings) > 0 {
		return res, nil
	}
	zones, err := c.checkOfferings(ctx, in, &res)
	if err != nil {
		return res, err
	}
	if err := c.checkReservation(ctx, in, zones, &res); err != nil {
		return res, err
	}
	if err := c.checkGPUQuota(ctx, in, aws.ToInt32(gpu.VCpuInfo.DefaultVCpus), &res); err != nil {
		return res, err
	}
	return res, c.checkVersion(ctx, in.KubernetesVersion, &res)
}

func (c *Clients) instanceTypes(ctx context.Context, names ...string) (map[string]ec2types.InstanceTypeInfo, error) {
	out := map[string]ec2types.InstanceTypeInfo{}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		got, err := c.EC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(n)}})
		if isCode(err, "InvalidInstanceType") {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describing EC2 instance type %s: %w", n, err)
		}
		for _, it := range got.InstanceTypes {
			out[string(it.InstanceType)] = it
		}
	}
	return out, nil
}

// offeredZones maps each instance type to the zones of the region that offer it.
func (c *Clients) offeredZones(ctx context.Context, names ...string) (map[string][]string, error) {
	out := map[string][]string{}
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: names}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing offerings of %v: %w", names, err)
		}
		for _, o := range page.InstanceTypeOfferings {
			out[string(o.InstanceType)] = append(out[string(o.InstanceType)], aws.ToString(o.Location))
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out, nil
}

// DefaultZones picks the zones a created network spans when none are given:
// the first zones (by name) that offer every one of the instance types.
func (c *Clients) DefaultZones(ctx context.Context, instanceTypes ...string) ([]string, error) {
	offered, err := c.offeredZones(ctx, instanceTypes...)
	if err != nil {
		return nil, err
	}
	common := offered[instanceTypes[0]]
	for _, t := range instanceTypes[1:] {
		common = slices.DeleteFunc(slices.Clone(common), func(z string) bool { return !slices.Contains(offered[t], z) })
	}
	if len(common) < 2 {
		return nil, fmt.Errorf("networking.availability_zones: only %v in %s offer all of %v and EKS needs two zones; choose other instance types or another region", common, c.Config.Region, instanceTypes)
	}
	return common[:min(len(common), defaultZoneCount)], nil
}

// checkOfferings returns the cluster's zones (none when they could not be told).
func (c *Clients) checkOfferings(ctx context.Context, in PreflightInput, res *PreflightResult) ([]string, error) {
	zones, field := in.Network.AvailabilityZones, "networking.availability_zones"
	if !in.Network.Creates() {
		field = "networking.subnet_ids"
		net, err := c.existingNetwork(ctx, in.Network)
		if err != nil {
			res.Findings = append(res.Findings, Finding{field, err.Error()})
			return nil, nil
		}
		zones = net.AvailabilityZones
	}
	if len(zones) == 0 {
		zones, err := c.DefaultZones(ctx, in.GPU.InstanceType, in.System.InstanceType)
		if err != nil {
			res.Findings = append(res.Findings, Finding{field, err.Error()})
		}
		return zones, nil
	}
	offered, err := c.offeredZones(ctx, in.GPU.InstanceType, in.System.InstanceType)
	if err != nil {
		return nil, err
	}
	for _, ng := range []struct{ group, itype string }{{"gpu_node_group", in.GPU.InstanceType}, {"system_node_group", in.System.InstanceType}} {
		var missing []string
		for _, z := range zones {
			if !slices.Contains(offered[ng.itype], z) {
				missing = append(missing, z)
			}
		}
		if len(missing) > 0 {
			res.Findings = append(res.Findings, Finding{field, fmt.Sprintf("%s.instance_type %s is not offered in %s; it is offered in %s: choose zones from those, or another instance type",
				ng.group, ng.itype, strings.Join(missing, ", "), strings.Join(offered[ng.itype], ", "))})
		}
	}
	return zones, nil
}

// upgradeSurge is how many instances a managed node group adds while it
// rolls to a new version: EKS raises its maximum and desired size by the
// larger of twice the zones its Auto Scaling group spans and the update's
// maxUnavailable (1 by default) (EKS user guide "Understand each phase of
// node updates", scale-up phase).
func upgradeSurge(ng NodeGroupSpec, network NetworkSpec) int64 {
	zones := int64(len(network.AvailabilityZones))
	switch {
	case ng.ColocateWithStorage:
		zones = 1
	case !network.Creates():
		zones = int64(len(network.SubnetIDs))
	case zones == 0:
		zones = defaultZoneCount
	}
	return max(2*zones, 1)
}

// checkGPUQuota compares the account's G and VT vCPU quota with what the node
// group needs at its maximum size, plus its surge during a version upgrade.
// Where Service Quotas does not answer for the code (emulators, some
// partitions), the check is skipped with the reason.
func (c *Clients) checkGPUQuota(ctx context.Context, in PreflightInput, vcpus int32, res *PreflightResult) error {
	gpu := in.GPU
	code, what := QuotaGAndVTOnDemand, "Running On-Demand G and VT instances"
	if gpu.CapacityType == "SPOT" {
		code, what = QuotaGAndVTSpot, "All G and VT Spot Instance Requests"
	}
	value, skip, err := c.quotaValue(ctx, code)
	if err != nil {
		return err
	}
	if skip != "" {
		res.Skipped = append(res.Skipped, fmt.Sprintf("vCPU quota %s (%s): Service Quotas did not answer (%s)", code, what, skip))
		return nil
	}
	limit := int64(value)
	instances, surge := int64(gpu.MaxSize), ""
	if in.Upgrade {
		n := upgradeSurge(gpu, in.Network)
		instances += n
		surge = fmt.Sprintf(" (max_size %d plus the %d EKS adds while it rolls the node group to the new version)", gpu.MaxSize, n)
	}
	need := instances * int64(vcpus)
	if need > limit {
		fit := limit/int64(max(vcpus, 1)) - (instances - int64(gpu.MaxSize))
		res.Findings = append(res.Findings, Finding{"gpu_node_group.max_size", fmt.Sprintf(
			"%d x %s%s needs %d vCPUs but the account's quota %s (%s) is %d: request an increase in Service Quotas, or lower max_size to %d",
			instances, gpu.InstanceType, surge, need, code, what, limit, max(fit, 0))})
	}
	return nil
}

// quotaValue is the account's applied value of an EC2 quota, or its AWS
// default where none was ever applied (GetServiceQuota then answers
// NoSuchResource). skip says why there is no answer at all.
func (c *Clients) quotaValue(ctx context.Context, code string) (value float64, skip string, err error) {
	applied, err := c.ServiceQuotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
	if err == nil {
		return aws.ToFloat64(applied.Quota.Value), "", nil
	}
	if !isCode(err, "NoSuchResourceException") {
		return 0, quotaSkip(err), quotaError(err, code)
	}
	def, err := c.ServiceQuotas.GetAWSDefaultServiceQuota(ctx, &servicequotas.GetAWSDefaultServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
	if err != nil {
		return 0, quotaSkip(err), quotaError(err, code)
	}
	return aws.ToFloat64(def.Quota.Value), "", nil
}

// quotaSkip is the reason to skip the quota check for errors that mean the
// API cannot answer here (emulators, partitions without it, no permission).
func quotaSkip(err error) string {
	if isNotImplemented(err) || isCode(err, "NoSuchResourceException", "AccessDeniedException") {
		return errorMessage(err)
	}
	return ""
}

func quotaError(err error, code string) error {
	if quotaSkip(err) != "" {
		return nil
	}
	return fmt.Errorf("reading Service Quotas ec2/%s: %w", code, err)
}

// checkVersion asks EKS which Kubernetes versions it offers.
func (c *Clients) checkVersion(ctx context.Context, version string, res *PreflightResult) error {
	// Every page, and every version: without includeAll EKS leaves out
	// versions in extended support, which a cluster may well run.
	var offered []string
	p := eks.NewDescribeClusterVersionsPaginator(c.EKS, &eks.DescribeClusterVersionsInput{IncludeAll: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if isNotImplemented(err) || isCode(err, "AccessDeniedException") {
				res.Skipped = append(res.Skipped, fmt.Sprintf("Kubernetes version %s: EKS DescribeClusterVersions did not answer (%s)", version, errorMessage(err)))
				return nil
			}
			return fmt.Errorf("listing EKS Kubernetes versions: %w", err)
		}
		for _, v := range page.ClusterVersions {
			offered = append(offered, aws.ToString(v.ClusterVersion))
		}
	}
	if !slices.Contains(offered, version) {
		sort.Strings(offered)
		res.Findings = append(res.Findings, Finding{"kubernetes_version", fmt.Sprintf("EKS does not offer Kubernetes %s; use one of %s", version, strings.Join(offered, ", "))})
	}
	return nil
}
