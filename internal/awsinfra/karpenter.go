package awsinfra

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Karpenter's AWS parts follow the reference setup of Karpenter v1.14
// ("Getting Started with Karpenter", its cloudformation.yaml): a node role
// with the managed node group policies and AmazonSSMManagedInstanceCore, a
// controller role, an SQS interruption queue (SSE, 300 s retention) fed by
// EventBridge rules. The node role is a role of its own, not the node
// groups' one: its EC2_LINUX access entry and its instance profiles come and
// go with Karpenter without touching the node groups' entry, which EKS
// manages.
var (
	karpenterNodeRole = roleSpec{suffix: "-karp-node", service: "ec2.amazonaws.com",
		policies: append(append([]string{}, nodeRole.policies...), "AmazonSSMManagedInstanceCore")}
	karpenterControllerRole = roleSpec{suffix: "-karpenter", service: "pods.eks.amazonaws.com"}
)

const (
	// karpenterPolicyName is the controller role's inline policy.
	karpenterPolicyName = "llmd-karpenter-controller"
	// karpenterEntryPart tags the node role's access entry: access_entries
	// reads only its own parts, so it never lists, changes or releases it.
	karpenterEntryPart = "karpenter-node-access-entry"
	karpenterQueuePart = "karpenter-interruption-queue"
	karpenterRulePart  = "karpenter-interruption-rule"
	// karpenterTargetID is the one target of each rule: PutTargets with
	// the same id replaces it, so repeating it is idempotent.
	karpenterTargetID = "KarpenterInterruptionQueueTarget"
)

// Tags Karpenter itself puts on what it launches (Karpenter v1.14
// pkg/utils GetTags and EC2NodeClass.InstanceProfileTags): the cluster tag
// with value "owned", the NodePool on instances, the EC2NodeClass on launch
// templates and instance profiles.
const (
	karpenterNodePoolTag  = "karpenter.sh/nodepool"
	karpenterNodeClassTag = "karpenter.k8s.aws/ec2nodeclass"
	eksClusterNameTag     = "eks:eks-cluster-name"
)

func clusterOwnedTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// karpenterRoleNames are the IAM roles of a cluster's Karpenter. They are
// not in RoleNames, which names the roles every cluster has.
func karpenterRoleNames(name, region string) []string {
	return []string{roleName(name, region, karpenterControllerRole), roleName(name, region, karpenterNodeRole)}
}

// karpenterQueueName is the interruption queue of a cluster. SQS queue
// names are per account and region, so the region is not in the name:
// at most 38 + 10 characters of SQS's 80.
func karpenterQueueName(cluster string) string { return cluster + "-karpenter" }

// interruptionRule is one EventBridge rule sending an interruption event to the queue.
type interruptionRule struct {
	kind, source, detailType string
}

// interruptionRules are the events Karpenter v1.14 reacts to, as its
// reference setup routes them: scheduled maintenance (AWS Health), Spot
// interruption warnings, rebalance recommendations, instance state changes
// and capacity reservation interruption warnings.
var interruptionRules = []interruptionRule{
	{"health", "aws.health", "AWS Health Event"},
	{"spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"},
	{"rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"},
	{"state-change", "aws.ec2", "EC2 Instance State-change Notification"},
	{"capacity", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"},
}

// karpenterRuleName names one rule; EventBridge rule names are per event
// bus and region: at most 38 + 11 + 12 characters of EventBridge's 64.
func karpenterRuleName(cluster, kind string) string { return cluster + "-karpenter-" + kind }

func (r interruptionRule) eventPattern() string {
	b, _ := json.Marshal(map[string][]string{"source": {r.source}, "detail-type": {r.detailType}})
	return string(b)
}

// KarpenterControllerPolicy is the inline policy of Karpenter's controller
// role, the permissions of Karpenter v1.14's reference controller policies
// scoped to one cluster: EC2 launches only of what carries the cluster's
// "owned" tag and a NodePool tag, termination and launch-template deletion
// only of those; instance profiles only with the cluster's tags; PassRole
// of the node role alone, to EC2; the interruption queue alone; reads that
// cannot be scoped by resource limited to the region.
func KarpenterControllerPolicy(partition, account, region, cluster, queueARN, nodeRoleARN string) (string, error) {
	ec2ARN := func(kind string) string { return "arn:" + partition + ":ec2:" + region + ":*:" + kind + "/*" }
	profiles := "arn:" + partition + ":iam::" + account + ":instance-profile/*"
	clusterARN := "arn:" + partition + ":eks:" + region + ":" + account + ":cluster/" + cluster
	owned := "aws:ResourceTag/" + clusterOwnedTag(cluster)
	requestOwned := map[string]any{"aws:RequestTag/" + clusterOwnedTag(cluster): "owned", "aws:RequestTag/" + eksClusterNameTag: cluster}
	launched := []string{ec2ARN("fleet"), ec2ARN("instance"), ec2ARN("volume"), ec2ARN("network-interface"), ec2ARN("launch-template"),
		ec2ARN("spot-instances-request")}
	withCreateAction := map[string]any{"ec2:CreateAction": []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"}}
	maps.Copy(withCreateAction, requestOwned)
	profileRequest := map[string]any{"aws:RequestTag/topology.kubernetes.io/region": region}
	maps.Copy(profileRequest, requestOwned)
	profileResource := map[string]any{owned: "owned", "aws:ResourceTag/topology.kubernetes.io/region": region}
	profileBoth := maps.Clone(profileRequest)
	maps.Copy(profileBoth, profileResource)
	statements := []map[string]any{
		{"Sid": "LaunchFromSharedResources", "Effect": "Allow", "Action": []string{"ec2:RunInstances", "ec2:CreateFleet"},
			// Images, subnets and security groups are not Karpenter's to tag.
			"Resource": []string{"arn:" + partition + ":ec2:" + region + "::image/*", "arn:" + partition + ":ec2:" + region + "::snapshot/*",
				ec2ARN("security-group"), ec2ARN("subnet"), ec2ARN("capacity-reservation"), ec2ARN("placement-group")}},
		{"Sid": "LaunchFromClusterTemplates", "Effect": "Allow", "Action": []string{"ec2:RunInstances", "ec2:CreateFleet"}, "Resource": ec2ARN("launch-template"),
			"Condition": map[string]any{"StringEquals": map[string]any{owned: "owned"}, "StringLike": map[string]any{"aws:ResourceTag/" + karpenterNodePoolTag: "*"}}},
		{"Sid": "CreateClusterTagged", "Effect": "Allow", "Action": []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"}, "Resource": launched,
			"Condition": map[string]any{"StringEquals": requestOwned, "StringLike": map[string]any{"aws:RequestTag/" + karpenterNodePoolTag: "*"}}},
		{"Sid": "TagWhenCreating", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": launched,
			"Condition": map[string]any{"StringEquals": withCreateAction, "StringLike": map[string]any{"aws:RequestTag/" + karpenterNodePoolTag: "*"}}},
		{"Sid": "TagClusterInstances", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": ec2ARN("instance"),
			"Condition": map[string]any{"StringEquals": map[string]any{owned: "owned"},
				"StringLike":                map[string]any{"aws:ResourceTag/" + karpenterNodePoolTag: "*"},
				"StringEqualsIfExists":      map[string]any{"aws:RequestTag/" + eksClusterNameTag: cluster},
				"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{eksClusterNameTag, "karpenter.sh/nodeclaim", "Name"}}}},
		{"Sid": "DeleteClusterTagged", "Effect": "Allow", "Action": []string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
			"Resource":  []string{ec2ARN("instance"), ec2ARN("launch-template")},
			"Condition": map[string]any{"StringEquals": map[string]any{owned: "owned"}, "StringLike": map[string]any{"aws:ResourceTag/" + karpenterNodePoolTag: "*"}}},
		{"Sid": "DescribeInRegion", "Effect": "Allow", "Resource": "*",
			"Action": []string{"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
				"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups",
				"ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"},
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:RequestedRegion": region}}},
		{"Sid": "PassNodeRoleToEC2", "Effect": "Allow", "Action": "iam:PassRole", "Resource": nodeRoleARN,
			"Condition": map[string]any{"StringEquals": map[string]any{"iam:PassedToService": []string{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}}},
		{"Sid": "CreateClusterInstanceProfiles", "Effect": "Allow", "Action": "iam:CreateInstanceProfile", "Resource": profiles,
			"Condition": map[string]any{"StringEquals": profileRequest, "StringLike": map[string]any{"aws:RequestTag/" + karpenterNodeClassTag: "*"}}},
		{"Sid": "TagClusterInstanceProfiles", "Effect": "Allow", "Action": "iam:TagInstanceProfile", "Resource": profiles,
			"Condition": map[string]any{"StringEquals": profileBoth,
				"StringLike": map[string]any{"aws:ResourceTag/" + karpenterNodeClassTag: "*", "aws:RequestTag/" + karpenterNodeClassTag: "*"}}},
		{"Sid": "ManageClusterInstanceProfiles", "Effect": "Allow", "Resource": profiles,
			"Action":    []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
			"Condition": map[string]any{"StringEquals": profileResource, "StringLike": map[string]any{"aws:ResourceTag/" + karpenterNodeClassTag: "*"}}},
		{"Sid": "ReadInstanceProfiles", "Effect": "Allow", "Action": "iam:GetInstanceProfile", "Resource": profiles},
		// IAM authorises ListInstanceProfiles on "*" only.
		{"Sid": "ListInstanceProfiles", "Effect": "Allow", "Action": "iam:ListInstanceProfiles", "Resource": "*"},
		{"Sid": "ReadPublicAMIParameters", "Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "arn:" + partition + ":ssm:" + region + "::parameter/aws/service/*"},
		// The Price List API has no resources to scope to.
		{"Sid": "ReadPrices", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
		{"Sid": "DescribeCluster", "Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": clusterARN},
		{"Sid": "ReadZonalShift", "Effect": "Allow", "Action": "arc-zonal-shift:GetManagedResource", "Resource": "*",
			"Condition": map[string]any{"StringEquals": map[string]any{"arc-zonal-shift:ResourceIdentifier": clusterARN}}},
		{"Sid": "ReadInterruptionQueue", "Effect": "Allow", "Action": []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}, "Resource": queueARN},
	}
	b, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": statements})
	return string(b), err
}

// interruptionQueuePolicy lets EventBridge (and SQS itself) send to the
// queue and refuses any access without TLS, as Karpenter's reference queue
// policy does.
func interruptionQueuePolicy(queueARN string) (string, error) {
	b, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Id": "EC2InterruptionPolicy", "Statement": []map[string]any{
		{"Sid": "EventBridgeSends", "Effect": "Allow", "Principal": map[string]any{"Service": []string{"events.amazonaws.com", "sqs.amazonaws.com"}},
			"Action": "sqs:SendMessage", "Resource": queueARN},
		{"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queueARN,
			"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}},
	}})
	return string(b), err
}

// ensureKarpenter makes (or adopts, when its tags say it is this cluster's)
// every AWS part Karpenter needs once the control plane is ACTIVE: its two
// roles, the queue and its rules, the controller's policy (which names the
// queue and the node role), the node role's access entry and the
// controller's Pod Identity association. The roles come first and go last
// (deleteKarpenter), so an owned controller role is there whenever a queue
// or rule is: reads and deletes look at SQS and EventBridge only then.
func (c *Clients) ensureKarpenter(ctx context.Context, spec ClusterSpec) error {
	k := spec.Karpenter
	var nodeARN, controllerARN string
	err := parallel(
		func() (err error) { nodeARN, err = c.ensureRole(ctx, spec, karpenterNodeRole); return err },
		func() (err error) { controllerARN, err = c.ensureRole(ctx, spec, karpenterControllerRole); return err },
	)
	if err != nil {
		return err
	}
	queueARN, err := c.ensureInterruptionQueue(ctx, spec)
	if err != nil {
		return err
	}
	role, err := arn.Parse(controllerARN)
	if err != nil {
		return fmt.Errorf("parsing the ARN %q of Karpenter's controller role: %w", controllerARN, err)
	}
	policy, err := KarpenterControllerPolicy(role.Partition, role.AccountID, c.Config.Region, spec.Name, queueARN, nodeARN)
	if err != nil {
		return err
	}
	name := roleName(spec.Name, c.Config.Region, karpenterControllerRole)
	// PutRolePolicy replaces the policy of that name: a changed queue or node role takes effect.
	if _, err := c.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(karpenterPolicyName),
		PolicyDocument: aws.String(policy)}); err != nil {
		return fmt.Errorf("putting Karpenter's controller policy on IAM role %s: %w", name, err)
	}
	return parallel(
		func() error { return c.ensureInterruptionRules(ctx, spec, queueARN) },
		func() error { return c.ensureNodeEntry(ctx, spec, nodeARN, karpenterEntry) },
		func() error {
			return c.BindServiceAccount(ctx, spec.Name, k.Namespace, k.ServiceAccount, controllerARN, spec.Tags)
		},
	)
}

// karpenterEntry is the node role's access entry: EC2_LINUX, which EKS
// maps to the node's user and the system:nodes group; EKS refuses access
// policies on such entries, so there are none.
var karpenterEntry = nodeEntry{kind: "EC2_LINUX", part: karpenterEntryPart, who: "Karpenter's node role"}

// isQueueMissing is SQS's answer for a queue that does not exist, in the
// JSON protocol (QueueDoesNotExist) and the older query protocol.
func isQueueMissing(err error) bool {
	return isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
}

// queueURL is the URL of the queue; "" when there is none.
func (c *Clients) queueURL(ctx context.Context, name string) (string, error) {
	got, err := c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if isQueueMissing(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("finding SQS queue %s: %w", name, err)
	}
	return aws.ToString(got.QueueUrl), nil
}

// interruptionQueue is the URL and tags of the queue named for the
// cluster; "" when there is none. owned says whether it carries the
// cluster's owner and region tags (ownsRole's test, which holds for any
// part): one that does not is never adopted, read or deleted.
func (c *Clients) interruptionQueue(ctx context.Context, cluster string) (url string, tags map[string]string, owned bool, err error) {
	name := karpenterQueueName(cluster)
	if url, err = c.queueURL(ctx, name); err != nil || url == "" {
		return "", nil, false, err
	}
	got, err := c.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if isQueueMissing(err) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("reading tags of SQS queue %s: %w", name, err)
	}
	return url, got.Tags, c.ownsRole(got.Tags, cluster), nil
}

// ensureInterruptionQueue makes or adopts the queue and brings its
// attributes, policy and tags to what they must be; it returns the queue's ARN.
func (c *Clients) ensureInterruptionQueue(ctx context.Context, spec ClusterSpec) (string, error) {
	name := karpenterQueueName(spec.Name)
	tags := c.tagSet(spec.Name, spec.Tags, karpenterQueuePart)
	url, have, owned, err := c.interruptionQueue(ctx, spec.Name)
	if err != nil {
		return "", err
	}
	if url != "" && !owned {
		return "", fmt.Errorf("SQS queue %s exists but is not owned by %s in %s (tag %s=%q): rename the cluster or delete the queue",
			name, spec.Name, c.Config.Region, OwnerTag, have[OwnerTag])
	}
	attrs := map[string]string{string(sqstypes.QueueAttributeNameMessageRetentionPeriod): "300",
		string(sqstypes.QueueAttributeNameSqsManagedSseEnabled): "true"}
	if url == "" {
		// SQS refuses a name for 60 s after its queue was deleted (SQS
		// Developer Guide, "Deleting a queue"): a mode switched back and
		// forth waits that out.
		err := c.waitFor(ctx, "SQS queue "+name+" to be created", func(ctx context.Context) error {
			out, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs, Tags: tags})
			if isCode(err, "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently") {
				return pending("%s", errorMessage(err))
			}
			if err != nil {
				return err
			}
			url = aws.ToString(out.QueueUrl)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("creating SQS queue %s: %w", name, err)
		}
	} else {
		c.adopted(ctx, "SQS queue", name)
		if err := c.syncQueueTags(ctx, url, have, tags); err != nil {
			return "", err
		}
	}
	got, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("reading the ARN of SQS queue %s: %w", name, err)
	}
	queueARN := got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	policy, err := interruptionQueuePolicy(queueARN)
	if err != nil {
		return "", err
	}
	attrs[string(sqstypes.QueueAttributeNamePolicy)] = policy
	if _, err := c.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
		return "", fmt.Errorf("setting the attributes and policy of SQS queue %s: %w", name, err)
	}
	return queueARN, nil
}

// syncQueueTags brings an adopted queue's tags to want, bookkeeping tags aside.
func (c *Clients) syncQueueTags(ctx context.Context, url string, have, want map[string]string) error {
	set, _ := tagDiff(have, want)
	_, remove := tagDiff(withoutBookkeeping(have), withoutBookkeeping(want))
	if len(set) > 0 {
		if _, err := c.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: set}); err != nil {
			return fmt.Errorf("tagging SQS queue %s: %w", url, err)
		}
	}
	if len(remove) > 0 {
		if _, err := c.SQS.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: remove}); err != nil {
			return fmt.Errorf("untagging SQS queue %s: %w", url, err)
		}
	}
	return nil
}

func ebTags(tags map[string]string) []ebtypes.Tag {
	return sdkTags(tags, func(k, v *string) ebtypes.Tag { return ebtypes.Tag{Key: k, Value: v} })
}

func fromEBTags(tags []ebtypes.Tag) map[string]string {
	return tagMap(tags, func(t ebtypes.Tag) (k, v *string) { return t.Key, t.Value })
}

// ownedRule is the ARN and tags of one of the cluster's rules; "" when it
// does not exist. A rule of that name without the cluster's owner and region
// tags is an error, never taken over.
func (c *Clients) ownedRule(ctx context.Context, cluster, name string) (string, map[string]string, error) {
	got, err := c.Events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
	if isNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("describing EventBridge rule %s: %w", name, err)
	}
	ruleARN := aws.ToString(got.Arn)
	tags, err := c.Events.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String(ruleARN)})
	if isNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading tags of EventBridge rule %s: %w", name, err)
	}
	have := fromEBTags(tags.Tags)
	if !c.ownsRole(have, cluster) {
		return "", nil, fmt.Errorf("EventBridge rule %s exists but is not owned by %s in %s (tag %s=%q): rename the cluster or delete the rule",
			name, cluster, c.Config.Region, OwnerTag, have[OwnerTag])
	}
	return ruleARN, have, nil
}

// ensureInterruptionRules makes or adopts each rule and points it at the
// queue. PutRule and PutTargets are upserts; PutRule sets tags only on a
// new rule, so an adopted one's tags are synced apart.
func (c *Clients) ensureInterruptionRules(ctx context.Context, spec ClusterSpec, queueARN string) error {
	jobs := []func() error{}
	for _, r := range interruptionRules {
		jobs = append(jobs, func() error {
			name := karpenterRuleName(spec.Name, r.kind)
			tags := c.tagSet(spec.Name, spec.Tags, karpenterRulePart)
			ruleARN, have, err := c.ownedRule(ctx, spec.Name, name)
			if err != nil {
				return err
			}
			if ruleARN != "" {
				c.adopted(ctx, "EventBridge rule", name)
			}
			out, err := c.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(r.eventPattern()),
				State: ebtypes.RuleStateEnabled, Description: aws.String("Karpenter interruption events (" + r.detailType + ") of llmd cluster " + spec.Name),
				Tags: ebTags(tags)})
			if err != nil {
				return fmt.Errorf("putting EventBridge rule %s: %w", name, err)
			}
			if ruleARN != "" {
				set, _ := tagDiff(have, tags)
				_, remove := tagDiff(withoutBookkeeping(have), withoutBookkeeping(tags))
				if len(set) > 0 {
					if _, err := c.Events.TagResource(ctx, &eventbridge.TagResourceInput{ResourceARN: out.RuleArn, Tags: ebTags(set)}); err != nil {
						return fmt.Errorf("tagging EventBridge rule %s: %w", name, err)
					}
				}
				if len(remove) > 0 {
					if _, err := c.Events.UntagResource(ctx, &eventbridge.UntagResourceInput{ResourceARN: out.RuleArn, TagKeys: remove}); err != nil {
						return fmt.Errorf("untagging EventBridge rule %s: %w", name, err)
					}
				}
			}
			put, err := c.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name),
				Targets: []ebtypes.Target{{Id: aws.String(karpenterTargetID), Arn: aws.String(queueARN)}}})
			if err != nil {
				return fmt.Errorf("pointing EventBridge rule %s at SQS queue %s: %w", name, queueARN, err)
			}
			if put.FailedEntryCount > 0 && len(put.FailedEntries) > 0 {
				f := put.FailedEntries[0]
				return fmt.Errorf("pointing EventBridge rule %s at SQS queue %s: %s: %s", name, queueARN, aws.ToString(f.ErrorCode), aws.ToString(f.ErrorMessage))
			}
			return nil
		})
	}
	return parallel(jobs...)
}

// findKarpenter reads what AWS holds of the cluster's Karpenter; nil when
// its controller role is missing or not the cluster's.
func (c *Clients) findKarpenter(ctx context.Context, cluster string) (*Karpenter, error) {
	controller, err := c.ownedRoleARN(ctx, cluster, roleName(cluster, c.Config.Region, karpenterControllerRole))
	if err != nil || controller == "" {
		return nil, err
	}
	out := &Karpenter{ControllerRoleARN: controller}
	nodeName := roleName(cluster, c.Config.Region, karpenterNodeRole)
	err = parallel(
		func() error {
			arn, err := c.ownedRoleARN(ctx, cluster, nodeName)
			if arn != "" {
				out.NodeRoleName, out.NodeRoleARN = nodeName, arn
			}
			return err
		},
		func() error {
			url, _, owned, err := c.interruptionQueue(ctx, cluster)
			if url != "" && owned {
				out.InterruptionQueue = karpenterQueueName(cluster)
			}
			return err
		},
	)
	return out, err
}

// ownedRoleARN is the ARN of the role if it exists and is the cluster's; "" otherwise.
func (c *Clients) ownedRoleARN(ctx context.Context, cluster, name string) (string, error) {
	got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("finding IAM role %s: %w", name, err)
	}
	if !c.ownsRole(fromIAMTags(got.Role.Tags), cluster) {
		return "", nil
	}
	return aws.ToString(got.Role.Arn), nil
}

// deleteKarpenter removes Karpenter's AWS parts from a cluster that keeps
// running without it: the controller's Pod Identity association and the
// node role's access entry (a cluster's destroy leaves both to EKS), then
// what deleteKarpenterParts removes.
func (c *Clients) deleteKarpenter(ctx context.Context, cluster string) error {
	controller, err := c.ownedRoleARN(ctx, cluster, roleName(cluster, c.Config.Region, karpenterControllerRole))
	if err != nil {
		return err
	}
	node, err := c.ownedRoleARN(ctx, cluster, roleName(cluster, c.Config.Region, karpenterNodeRole))
	if err != nil {
		return err
	}
	err = parallel(
		func() error { return c.unbindRole(ctx, cluster, controller) },
		func() error { return c.deleteNodeEntry(ctx, cluster, node, karpenterEntry) },
	)
	if err != nil {
		return err
	}
	return c.deleteKarpenterParts(ctx, cluster)
}

// deleteKarpenterParts removes the parts of Karpenter outside the control
// plane: the rules and the queue (looked for only while the controller role
// is there, see ensureKarpenter), the instances, launch templates and
// instance profiles Karpenter made for the cluster and left (a control plane
// deleted under a running Karpenter leaves its nodes), and the two roles.
// Parts already gone are fine.
func (c *Clients) deleteKarpenterParts(ctx context.Context, cluster string) error {
	controller, err := c.ownedRoleARN(ctx, cluster, roleName(cluster, c.Config.Region, karpenterControllerRole))
	if err != nil {
		return err
	}
	if controller != "" {
		if err := c.deleteInterruptionRules(ctx, cluster); err != nil {
			return err
		}
		if err := c.deleteInterruptionQueue(ctx, cluster); err != nil {
			return err
		}
	}
	// Nodes first: the launch templates and instance profiles are theirs.
	if err := c.terminateKarpenterNodes(ctx, cluster); err != nil {
		return err
	}
	return parallel(
		func() error { return c.deleteKarpenterLaunchTemplates(ctx, cluster) },
		func() error { return c.deleteKarpenterInstanceProfiles(ctx, cluster) },
		func() error {
			return c.deleteRole(ctx, cluster, roleName(cluster, c.Config.Region, karpenterControllerRole))
		},
	)
}

// unbindRole deletes the cluster's Pod Identity associations naming roleARN,
// wherever the controller ran (the spec that placed it is gone by now).
func (c *Clients) unbindRole(ctx context.Context, cluster, roleARN string) error {
	if roleARN == "" {
		return nil
	}
	p := eks.NewListPodIdentityAssociationsPaginator(c.EKS, &eks.ListPodIdentityAssociationsInput{ClusterName: aws.String(cluster)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing EKS Pod Identity associations of cluster %s: %w", cluster, err)
		}
		for _, a := range page.Associations {
			got, err := c.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(cluster), AssociationId: a.AssociationId})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("describing EKS Pod Identity association %s of cluster %s: %w", aws.ToString(a.AssociationId), cluster, err)
			}
			if aws.ToString(got.Association.RoleArn) != roleARN {
				continue
			}
			if _, err := c.EKS.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String(cluster),
				AssociationId: a.AssociationId}); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting EKS Pod Identity association %s of cluster %s: %w", aws.ToString(a.AssociationId), cluster, err)
			}
		}
	}
	return nil
}

// ownedRules are the cluster's rules, by name: every rule under the
// cluster's prefix that carries its owner tag, so a rule of a kind a later
// release dropped is found too.
func (c *Clients) ownedRules(ctx context.Context, cluster string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	in := &eventbridge.ListRulesInput{NamePrefix: aws.String(karpenterRuleName(cluster, ""))}
	for {
		page, err := c.Events.ListRules(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing EventBridge rules of %s: %w", cluster, err)
		}
		for _, r := range page.Rules {
			tags, err := c.Events.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: r.Arn})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading tags of EventBridge rule %s: %w", aws.ToString(r.Name), err)
			}
			if have := fromEBTags(tags.Tags); c.ownsRole(have, cluster) {
				out[aws.ToString(r.Name)] = have
			}
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// deleteInterruptionRules removes the rules' targets, which EventBridge
// requires before it deletes a rule, then the rules.
func (c *Clients) deleteInterruptionRules(ctx context.Context, cluster string) error {
	rules, err := c.ownedRules(ctx, cluster)
	if err != nil {
		return err
	}
	jobs := []func() error{}
	for name := range rules {
		jobs = append(jobs, func() error {
			targets, err := c.Events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(name)})
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("listing targets of EventBridge rule %s: %w", name, err)
			}
			var ids []string
			for _, t := range targets.Targets {
				ids = append(ids, aws.ToString(t.Id))
			}
			if len(ids) > 0 {
				if _, err := c.Events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), Ids: ids}); err != nil && !isNotFound(err) {
					return fmt.Errorf("removing targets of EventBridge rule %s: %w", name, err)
				}
			}
			if _, err := c.Events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name)}); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting EventBridge rule %s: %w", name, err)
			}
			return nil
		})
	}
	return parallel(jobs...)
}

func (c *Clients) deleteInterruptionQueue(ctx context.Context, cluster string) error {
	url, _, owned, err := c.interruptionQueue(ctx, cluster)
	if err != nil || url == "" || !owned {
		return err
	}
	if _, err := c.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil && !isQueueMissing(err) {
		return fmt.Errorf("deleting SQS queue %s: %w", karpenterQueueName(cluster), err)
	}
	return nil
}

// karpenterNodeFilters select the instances Karpenter launched for the
// cluster: its "owned" cluster tag and a NodePool tag (managed node
// groups' instances have the first only).
func karpenterNodeFilters(cluster string, states ...string) []ec2types.Filter {
	return []ec2types.Filter{
		{Name: aws.String("tag:" + clusterOwnedTag(cluster)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{karpenterNodePoolTag}},
		{Name: aws.String("instance-state-name"), Values: states},
	}
}

// karpenterNodes are the instances in states Karpenter launched for the cluster.
func (c *Clients) karpenterNodes(ctx context.Context, cluster string, states ...string) ([]ec2types.Instance, error) {
	return c.launchedNodes(ctx, "Karpenter's instances of "+cluster, karpenterNodeFilters(cluster, states...), func(tags map[string]string) bool {
		_, ok := tags[karpenterNodePoolTag]
		return ok && tags[clusterOwnedTag(cluster)] == "owned"
	})
}

// terminateKarpenterNodes terminates the instances Karpenter launched for
// the cluster and waits until they are gone.
func (c *Clients) terminateKarpenterNodes(ctx context.Context, cluster string) error {
	nodes, err := c.karpenterNodes(ctx, cluster, liveStates...)
	if err != nil || len(nodes) == 0 {
		return err
	}
	var ids []string
	for _, n := range nodes {
		if n.State == nil || n.State.Name != ec2types.InstanceStateNameShuttingDown {
			ids = append(ids, aws.ToString(n.InstanceId))
		}
	}
	if len(ids) > 0 {
		c.logf(ctx, "terminating the instances Karpenter launched", map[string]any{"instances": ids})
		if _, err := c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil && !isNotFound(err) {
			return fmt.Errorf("terminating Karpenter's instances %v of %s: %w", ids, cluster, err)
		}
	}
	return c.waitNodesGone(ctx, "Karpenter's instances of "+cluster, func(ctx context.Context, states ...string) ([]ec2types.Instance, error) {
		return c.karpenterNodes(ctx, cluster, states...)
	})
}

// deleteKarpenterLaunchTemplates deletes the launch templates Karpenter
// made for the cluster (found as Karpenter finds them: the EKS cluster name
// tag and an EC2NodeClass tag).
func (c *Clients) deleteKarpenterLaunchTemplates(ctx context.Context, cluster string) error {
	lts, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + eksClusterNameTag), Values: []string{cluster}}}})
	if err != nil {
		return fmt.Errorf("listing Karpenter's launch templates of %s: %w", cluster, err)
	}
	for _, lt := range lts.LaunchTemplates {
		tags := fromEC2Tags(lt.Tags)
		if _, ok := tags[karpenterNodeClassTag]; !ok || tags[eksClusterNameTag] != cluster {
			continue
		}
		if _, err := c.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting Karpenter's launch template %s: %w", aws.ToString(lt.LaunchTemplateName), err)
		}
	}
	return nil
}

// deleteKarpenterInstanceProfiles deletes the instance profiles Karpenter
// made for the node role (tagged with the cluster, its region and an
// EC2NodeClass), then the node role; a profile of anyone else only loses
// the role, as deleteRole does.
func (c *Clients) deleteKarpenterInstanceProfiles(ctx context.Context, cluster string) error {
	name := roleName(cluster, c.Config.Region, karpenterNodeRole)
	if arn, err := c.ownedRoleARN(ctx, cluster, name); err != nil || arn == "" {
		return err
	}
	p := iam.NewListInstanceProfilesForRolePaginator(c.IAM, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String(name)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing instance profiles of IAM role %s: %w", name, err)
		}
		for _, ip := range page.InstanceProfiles {
			// GetInstanceProfile answers with the tags (moto 5.2.1 lacks ListInstanceProfileTags).
			got, err := c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: ip.InstanceProfileName})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading tags of instance profile %s: %w", aws.ToString(ip.InstanceProfileName), err)
			}
			tags := fromIAMTags(got.InstanceProfile.Tags)
			if _, ok := tags[karpenterNodeClassTag]; !ok || tags[clusterOwnedTag(cluster)] != "owned" || tags["topology.kubernetes.io/region"] != c.Config.Region {
				continue
			}
			if _, err := c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: ip.InstanceProfileName,
				RoleName: aws.String(name)}); err != nil && !isNotFound(err) {
				return fmt.Errorf("removing IAM role %s from instance profile %s: %w", name, aws.ToString(ip.InstanceProfileName), err)
			}
			if _, err := c.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: ip.InstanceProfileName}); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting Karpenter's instance profile %s: %w", aws.ToString(ip.InstanceProfileName), err)
			}
		}
	}
	return c.deleteRole(ctx, cluster, name)
}

// ownedKarpenterParts are the parts FindOwnedParts lists for Karpenter: the
// queue and rules (while the controller role is there, see
// ensureKarpenter) and the instances Karpenter launched, which carry
// Karpenter's tags rather than the owner tag.
func (c *Clients) ownedKarpenterParts(ctx context.Context, owner string, roles []OwnedPart) ([]OwnedPart, error) {
	var parts []OwnedPart
	controller := roleName(owner, c.Config.Region, karpenterControllerRole)
	for _, r := range roles {
		if r.ID != controller {
			continue
		}
		url, tags, owned, err := c.interruptionQueue(ctx, owner)
		if err != nil {
			return nil, err
		}
		if url != "" && owned {
			parts = append(parts, OwnedPart{"sqs queue", karpenterQueueName(owner), tags})
		}
		rules, err := c.ownedRules(ctx, owner)
		if err != nil {
			return nil, err
		}
		for name, tags := range rules {
			parts = append(parts, OwnedPart{"events rule", name, tags})
		}
	}
	nodes, err := ownedNodeParts(ctx, "ec2 instance (karpenter)", func(ctx context.Context, states ...string) ([]ec2types.Instance, error) {
		return c.karpenterNodes(ctx, owner, states...)
	})
	return append(parts, nodes...), err
}
