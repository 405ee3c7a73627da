package awsinfra

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// karpenterDoc is an IAM or SQS policy document as the tests read it.
type karpenterDoc struct {
	Statement []struct {
		Sid       string
		Effect    string
		Principal any
		Action    any
		Resource  any
		Condition map[string]map[string]any
	}
}

func parseDoc(t *testing.T, raw string) karpenterDoc {
	t.Helper()
	var doc karpenterDoc
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("policy is not JSON: %v\n%s", err, raw)
	}
	return doc
}

// TestKarpenterControllerPolicy: moto does not enforce IAM, so the
// controller's policy is held to what it must and must not grant: every
// permission Karpenter v1.14 calls, PassRole of the node role alone and to
// EC2 alone, SQS on the interruption queue alone, EKS on the cluster alone,
// EC2 changes to launch templates and instances only under the cluster's
// tags, no wildcard actions, and within IAM's inline policy size.
func TestKarpenterControllerPolicy(t *testing.T) {
	const (
		queueARN = "arn:aws:sqs:us-west-2:123456789012:demo-karpenter"
		nodeARN  = "arn:aws:iam::123456789012:role/demo-us-west-2-karp-node"
	)
	raw, err := KarpenterControllerPolicy("aws", "123456789012", "us-west-2", "demo", queueARN, nodeARN)
	if err != nil {
		t.Fatal(err)
	}
	// IAM's limit for a role's inline policies, whitespace not counted (IAM User Guide, "IAM and AWS STS quotas").
	if len(raw) > 10240 {
		t.Errorf("policy is %d characters, above IAM's 10,240 for a role's inline policies", len(raw))
	}
	granted := map[string]bool{}
	for _, s := range parseDoc(t, raw).Statement {
		res, acts := strs(s.Resource), strs(s.Action)
		if s.Effect != "Allow" {
			t.Errorf("%s: effect %s", s.Sid, s.Effect)
		}
		for _, a := range acts {
			granted[a] = true
			service, op, _ := strings.Cut(a, ":")
			if strings.Contains(op, "*") {
				t.Errorf("%s grants the wildcard action %s", s.Sid, a)
			}
			switch {
			case a == "iam:PassRole":
				if !slices.Equal(res, []string{nodeARN}) {
					t.Errorf("%s: PassRole on %v, want the node role alone", s.Sid, res)
				}
				if to := strs(s.Condition["StringEquals"]["iam:PassedToService"]); !slices.Contains(to, "ec2.amazonaws.com") || len(to) > 2 {
					t.Errorf("%s: PassRole to %v, want EC2 alone", s.Sid, to)
				}
			case service == "sqs":
				if !slices.Equal(res, []string{queueARN}) {
					t.Errorf("%s: %s on %v, want the queue alone", s.Sid, a, res)
				}
			case service == "eks":
				if !slices.Equal(res, []string{"arn:aws:eks:us-west-2:123456789012:cluster/demo"}) {
					t.Errorf("%s: %s on %v, want the cluster alone", s.Sid, a, res)
				}
			case a == "ssm:GetParameter":
				if !slices.Equal(res, []string{"arn:aws:ssm:us-west-2::parameter/aws/service/*"}) {
					t.Errorf("%s: %s on %v, want AWS's public parameters alone", s.Sid, a, res)
				}
			case a == "ec2:TerminateInstances", a == "ec2:DeleteLaunchTemplate", a == "ec2:CreateTags", a == "ec2:CreateLaunchTemplate":
				// Changes to what Karpenter launched: only under the cluster's tag.
				if !conditionNames(s.Condition, "kubernetes.io/cluster/demo") {
					t.Errorf("%s: %s without the cluster's tag condition: %v", s.Sid, a, s.Condition)
				}
			case strings.HasPrefix(a, "iam:") && a != "iam:ListInstanceProfiles":
				for _, r := range res {
					if r != "arn:aws:iam::123456789012:instance-profile/*" {
						t.Errorf("%s: %s on %s, want instance profiles alone", s.Sid, a, r)
					}
				}
				if a != "iam:GetInstanceProfile" && !conditionNames(s.Condition, "kubernetes.io/cluster/demo") {
					t.Errorf("%s: %s without the cluster's tag condition", s.Sid, a)
				}
			}
			if slices.Contains(res, "*") && !strings.HasPrefix(a, "ec2:Describe") &&
				!slices.Contains([]string{"pricing:GetProducts", "iam:ListInstanceProfiles", "arc-zonal-shift:GetManagedResource"}, a) {
				t.Errorf("%s: %s on every resource", s.Sid, a)
			}
			if strings.HasPrefix(a, "ec2:Describe") && !slices.Equal(strs(s.Condition["StringEquals"]["aws:RequestedRegion"]), []string{"us-west-2"}) {
				t.Errorf("%s: %s not limited to the region", s.Sid, a)
			}
		}
	}
	for _, a := range []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags", "ec2:TerminateInstances",
		"ec2:DeleteLaunchTemplate", "ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceTypeOfferings",
		"ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
		"pricing:GetProducts", "ssm:GetParameter", "iam:PassRole", "iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
		"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile", "iam:ListInstanceProfiles", "eks:DescribeCluster",
		"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"} {
		if !granted[a] {
			t.Errorf("the policy does not grant %s", a)
		}
	}

	q := parseDoc(t, mustString(interruptionQueuePolicy(queueARN)))
	var sends, denies bool
	for _, s := range q.Statement {
		if !slices.Equal(strs(s.Resource), []string{queueARN}) {
			t.Errorf("queue policy statement %s on %v", s.Sid, s.Resource)
		}
		switch s.Effect {
		case "Allow":
			p, _ := s.Principal.(map[string]any)
			sends = slices.Equal(strs(s.Action), []string{"sqs:SendMessage"}) && slices.Equal(strs(p["Service"]), []string{"events.amazonaws.com", "sqs.amazonaws.com"})
		case "Deny":
			denies = s.Principal == "*" && s.Condition["Bool"]["aws:SecureTransport"] == "false"
		}
	}
	if !sends || !denies {
		t.Errorf("queue policy lets EventBridge send: %v, denies plain HTTP: %v", sends, denies)
	}
}

func mustString(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// sameJSON reports whether two JSON documents hold the same values (moto
// re-serialises a queue's policy).
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// conditionNames reports whether any condition key names the tag.
func conditionNames(cond map[string]map[string]any, tag string) bool {
	for _, kv := range cond {
		for k := range kv {
			if strings.HasSuffix(k, "/"+tag) {
				return true
			}
		}
	}
	return false
}

// TestKarpenterNames: every name fits its service's limit for the longest
// cluster name (38) in the longest region name (EKS Auto Mode's node role too).
func TestKarpenterNames(t *testing.T) {
	cluster, region := strings.Repeat("c", 38), "ap-southeast-4"
	for _, n := range append(karpenterRoleNames(cluster, region), roleName(cluster, region, autoModeNodeRole)) {
		if len(n) > 64 {
			t.Errorf("IAM role %s: %d characters", n, len(n))
		}
	}
	if n := karpenterQueueName(cluster); len(n) > 80 {
		t.Errorf("SQS queue %s: %d characters", n, len(n))
	}
	for _, r := range interruptionRules {
		if n := karpenterRuleName(cluster, r.kind); len(n) > 64 {
			t.Errorf("EventBridge rule %s: %d characters", n, len(n))
		}
	}
}

// TestKarpenterParts follows one cluster through compute modes against
// moto and the stand-in: created with Karpenter (no GPU node group; roles,
// entry, association, queue, rules), created again (adopted, nothing
// doubled), switched to the GPU node group (Karpenter's parts and what
// Karpenter launched gone), switched back (the node group gone), deleted
// (nothing owned left).
func TestKarpenterParts(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	const name = "karp"
	spec := testSpec(name)
	spec.GPU.DesiredSize, spec.GPU.MinSize, spec.GPU.MaxSize = 1, 0, 2
	spec.Karpenter = &KarpenterSpec{Namespace: "kube-system", ServiceAccount: "karpenter"}
	controllerName, nodeName := name+"-us-west-2-karpenter", name+"-us-west-2-karp-node"

	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("creating with Karpenter: %v", err)
	}
	var k Karpenter
	t.Run("create", func(t *testing.T) {
		if cl.GPU != nil || nodeGroups(t, c, name) != "system" {
			t.Errorf("node groups %q, GPU %+v; want the system one alone", nodeGroups(t, c, name), cl.GPU)
		}
		if cl.Karpenter == nil {
			t.Fatal("cl.Karpenter is nil after a create with Karpenter")
		}
		k = *cl.Karpenter
		want := Karpenter{ControllerRoleARN: "arn:aws:iam::123456789012:role/" + controllerName, NodeRoleName: nodeName,
			NodeRoleARN: "arn:aws:iam::123456789012:role/" + nodeName, InterruptionQueue: "karp-karpenter"}
		if k != want {
			t.Fatalf("read back %+v, want %+v", k, want)
		}
		checkKarpenterParts(t, c, standIn, name, k)
	})

	before, entries := countOwned(t, c, name), standIn.AccessEntries(name)
	t.Run("create again adopts", func(t *testing.T) {
		standIn.ResetCalls()
		again, err := c.CreateCluster(ctx, spec)
		if err != nil {
			t.Fatalf("creating again: %v", err)
		}
		if *again.Karpenter != k {
			t.Errorf("read back %+v after the second create, want %+v", *again.Karpenter, k)
		}
		if n := countOwned(t, c, name); n != before {
			t.Errorf("%d owned parts after the second create, %d before", n, before)
		}
		for _, op := range standIn.Calls() {
			if op == "CreateQueue" || op == "CreateRole" || op == "CreateAccessEntry" || op == "CreatePodIdentityAssociation" {
				t.Errorf("the second create called %s", op)
			}
		}
		checkKarpenterParts(t, c, standIn, name, k)
		if got := standIn.AccessEntries(name); !slices.Equal(got, entries) {
			t.Errorf("access entries %v after the second create, %v before", got, entries)
		}
	})

	t.Run("foreign parts refused", func(t *testing.T) {
		foreign := testSpec("alien")
		if _, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("alien-karpenter")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ensureInterruptionQueue(ctx, foreign); err == nil || !strings.Contains(err.Error(), "not owned by alien") {
			t.Errorf("adopting an untagged queue: %v", err)
		}
		if _, err := c.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("alien-karpenter-spot"), EventPattern: aws.String(`{"source":["aws.ec2"]}`)}); err != nil {
			t.Fatal(err)
		}
		if err := c.ensureInterruptionRules(ctx, foreign, "arn:aws:sqs:us-west-2:123456789012:alien-karpenter"); err == nil || !strings.Contains(err.Error(), "not owned by alien") {
			t.Errorf("adopting an untagged rule: %v", err)
		}
	})

	plantKarpenterNodes(t, c, name, cl.Network.PrivateSubnetIDs[0], nodeName)
	t.Run("to the GPU node group", func(t *testing.T) {
		updateToNodeGroup(t, c, spec)
		checkKarpenterGone(t, c, standIn, name, k)
	})

	t.Run("back to Karpenter", func(t *testing.T) {
		got := updateFromNodeGroup(t, c, spec)
		if got.Karpenter == nil || *got.Karpenter != k {
			t.Fatalf("read back %+v, want %+v", got.Karpenter, k)
		}
		checkKarpenterParts(t, c, standIn, name, k)
	})

	plantKarpenterNodes(t, c, name, cl.Network.PrivateSubnetIDs[0], nodeName)
	t.Run("delete", func(t *testing.T) {
		deleteLeavesNothing(t, c, name)
		checkKarpenterGone(t, c, standIn, name, k)
	})
}

// updateToNodeGroup switches the cluster's GPU nodes from spec's launcher
// (Karpenter, EKS Auto Mode) to the GPU node group and checks the read-back.
func updateToNodeGroup(t *testing.T, c *Clients, spec ClusterSpec) *Cluster {
	t.Helper()
	spec.Karpenter, spec.AutoMode = nil, false
	got, err := c.UpdateCluster(context.Background(), spec)
	if err != nil {
		t.Fatalf("updating to the node group: %v", err)
	}
	if got.GPU == nil || got.Karpenter != nil || got.AutoMode != nil {
		t.Fatalf("GPU node group %+v, Karpenter %+v, Auto Mode %+v; want the node group alone", got.GPU, got.Karpenter, got.AutoMode)
	}
	return got
}

// updateFromNodeGroup switches the GPU nodes back to spec's launcher and
// checks the GPU node group is gone.
func updateFromNodeGroup(t *testing.T, c *Clients, spec ClusterSpec) *Cluster {
	t.Helper()
	got, err := c.UpdateCluster(context.Background(), spec)
	if err != nil {
		t.Fatalf("updating from the node group: %v", err)
	}
	if got.GPU != nil || nodeGroups(t, c, spec.Name) != "system" {
		t.Errorf("node groups %q after the switch from the node group, want the system one alone", nodeGroups(t, c, spec.Name))
	}
	return got
}

// deleteLeavesNothing deletes the cluster and finds nothing owned left.
func deleteLeavesNothing(t *testing.T, c *Clients, name string) {
	t.Helper()
	if err := c.DeleteCluster(context.Background(), name); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, name); n != 0 {
		t.Errorf("%d owned parts left after delete", n)
	}
}

// nodeGroups are the cluster's node group names, joined by commas.
func nodeGroups(t *testing.T, c *Clients, cluster string) string {
	t.Helper()
	out, err := c.EKS.ListNodegroups(context.Background(), &eks.ListNodegroupsInput{ClusterName: aws.String(cluster)})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out.Nodegroups)
	return strings.Join(out.Nodegroups, ",")
}

// checkKarpenterParts checks every AWS part of the cluster's Karpenter.
func checkKarpenterParts(t *testing.T, c *Clients, standIn *testenv.AWSStandIn, cluster string, k Karpenter) {
	t.Helper()
	ctx := context.Background()
	controllerName := strings.TrimPrefix(k.ControllerRoleARN, "arn:aws:iam::123456789012:role/")
	if doc := roleTrust(t, c, k.NodeRoleName); !strings.Contains(doc, `"ec2.amazonaws.com"`) || strings.Contains(doc, "pods.eks") {
		t.Errorf("node role trust %s, want EC2", doc)
	}
	if doc := roleTrust(t, c, controllerName); !strings.Contains(doc, `"pods.eks.amazonaws.com"`) || !strings.Contains(doc, "sts:TagSession") {
		t.Errorf("controller role trust %s, want EKS Pod Identity", doc)
	}
	if names, want := attachedPolicies(t, c, k.NodeRoleName), []string{"AmazonEC2ContainerRegistryReadOnly", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore"}; !slices.Equal(names, want) {
		t.Errorf("node role policies %v, want %v", names, want)
	}
	queue, err := c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(k.InterruptionQueue)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	a := attrs.Attributes
	queueARN := a["QueueArn"]
	if a["SqsManagedSseEnabled"] != "true" || a["MessageRetentionPeriod"] != "300" || !sameJSON(a["Policy"], mustString(interruptionQueuePolicy(queueARN))) {
		t.Errorf("queue attributes %v", a)
	}
	policy, err := c.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(controllerName), PolicyName: aws.String(karpenterPolicyName)})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(policy.PolicyDocument))
	if want := mustString(KarpenterControllerPolicy("aws", "123456789012", testenv.Region, cluster, queueARN, k.NodeRoleARN)); doc != want {
		t.Errorf("controller policy\n%s\nwant\n%s", doc, want)
	}
	if got := standIn.AccessEntryType(cluster, k.NodeRoleARN); got != "EC2_LINUX" {
		t.Errorf("node role access entry of type %q, want EC2_LINUX", got)
	}
	// As EKS makes a node entry: the node's user in system:nodes.
	if e, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(k.NodeRoleARN)}); err != nil ||
		aws.ToString(e.AccessEntry.Username) != "system:node:{{EC2PrivateDNSName}}" || !slices.Equal(e.AccessEntry.KubernetesGroups, []string{"system:nodes"}) {
		t.Errorf("node role access entry %+v (%v), want user system:node:{{EC2PrivateDNSName}} in system:nodes", e, err)
	}
	pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(k.NodeRoleARN)})
	if err != nil || len(pols.AssociatedAccessPolicies) != 0 {
		t.Errorf("node role entry's access policies %v (%v), want none", pols, err)
	}
	entries, err := c.findAccessEntries(ctx, cluster)
	if err != nil || len(entries) != 0 {
		t.Errorf("access_entries reads %v (%v): the node role's entry is not the user's", entries, err)
	}
	if got := standIn.PodIdentityAssociations(cluster); len(got) != 1 || got["kube-system/karpenter"] != k.ControllerRoleARN {
		t.Errorf("Pod Identity associations %v, want kube-system/karpenter alone to %s", got, k.ControllerRoleARN)
	}
	rules, err := c.ownedRules(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != len(interruptionRules) {
		t.Errorf("%d owned rules %v, want %d", len(rules), rules, len(interruptionRules))
	}
	for _, r := range interruptionRules {
		name := karpenterRuleName(cluster, r.kind)
		got, err := c.Events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
		if err != nil {
			t.Errorf("rule %s: %v", name, err)
			continue
		}
		var pattern map[string][]string
		if err := json.Unmarshal([]byte(aws.ToString(got.EventPattern)), &pattern); err != nil ||
			!slices.Equal(pattern["source"], []string{r.source}) || !slices.Equal(pattern["detail-type"], []string{r.detailType}) || len(pattern) != 2 {
			t.Errorf("rule %s pattern %s, want source %s, detail-type %s", name, aws.ToString(got.EventPattern), r.source, r.detailType)
		}
		if got.State != "ENABLED" {
			t.Errorf("rule %s is %s", name, got.State)
		}
		targets, err := c.Events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(name)})
		if err != nil || len(targets.Targets) != 1 || aws.ToString(targets.Targets[0].Arn) != queueARN {
			t.Errorf("rule %s targets %+v (%v), want the queue alone", name, targets, err)
		}
	}
}

// roleTrust is the trust policy of an IAM role, decoded.
func roleTrust(t *testing.T, c *Clients, role string) string {
	t.Helper()
	got, err := c.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: aws.String(role)})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(got.Role.AssumeRolePolicyDocument))
	return doc
}

// attachedPolicies are the names of the managed policies on an IAM role, sorted.
func attachedPolicies(t *testing.T, c *Clients, role string) []string {
	t.Helper()
	attached, err := c.IAM.ListAttachedRolePolicies(context.Background(), &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range attached.AttachedPolicies {
		names = append(names, aws.ToString(p.PolicyName))
	}
	sort.Strings(names)
	return names
}

// checkKarpenterGone checks that none of Karpenter's parts is left, nor
// what plantKarpenterNodes launched in Karpenter's name.
func checkKarpenterGone(t *testing.T, c *Clients, standIn *testenv.AWSStandIn, cluster string, k Karpenter) {
	t.Helper()
	ctx := context.Background()
	for _, role := range karpenterRoleNames(cluster, testenv.Region) {
		if _, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); !isNotFound(err) {
			t.Errorf("IAM role %s: %v, want it gone", role, err)
		}
	}
	if u, err := c.queueURL(ctx, k.InterruptionQueue); err != nil || u != "" {
		t.Errorf("queue %s: %q (%v), want it gone", k.InterruptionQueue, u, err)
	}
	rules, err := c.Events.ListRules(ctx, &eventbridge.ListRulesInput{NamePrefix: aws.String(karpenterRuleName(cluster, ""))})
	if err != nil || len(rules.Rules) != 0 {
		t.Errorf("rules %+v (%v), want none", rules, err)
	}
	if got := standIn.AccessEntryType(cluster, k.NodeRoleARN); got != "" {
		t.Errorf("node role access entry of type %q left", got)
	}
	if got := standIn.PodIdentityAssociations(cluster); len(got) != 0 {
		t.Errorf("Pod Identity associations %v left", got)
	}
	nodes, err := c.karpenterNodes(ctx, cluster, "pending", "running", "stopping", "stopped", "shutting-down")
	if err != nil || len(nodes) != 0 {
		t.Errorf("%d of Karpenter's instances left (%v)", len(nodes), err)
	}
	lts, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range lts.LaunchTemplates {
		if aws.ToString(lt.LaunchTemplateName) == "karpenter.k8s.aws/"+cluster {
			t.Errorf("Karpenter's launch template %s left", aws.ToString(lt.LaunchTemplateId))
		}
	}
	if _, err := c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(cluster + "_karpenter")}); !isNotFound(err) {
		t.Errorf("Karpenter's instance profile: %v, want it gone", err)
	}
}

// plantKarpenterNodes does what a running Karpenter does, with its tags:
// launches an instance, makes a launch template and an instance profile
// holding the node role.
func plantKarpenterNodes(t *testing.T, c *Clients, cluster, subnet, nodeRole string) {
	t.Helper()
	ctx := context.Background()
	tags := map[string]string{clusterOwnedTag(cluster): "owned", karpenterNodePoolTag: "gpu", eksClusterNameTag: cluster, karpenterNodeClassTag: "gpu"}
	if _, err := c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceTypeG5Xlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		// Explicit: the primary interface EC2 makes at launch goes with the
		// instance (its attachment's DeleteOnTermination is true); moto 5.2.1
		// keeps it unless the launch asks, and the subnet's delete would wait on it.
		NetworkInterfaces: []ec2types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0), SubnetId: aws.String(subnet),
			DeleteOnTermination: aws.Bool(true)}},
		TagSpecifications: ec2TagSpec(ec2types.ResourceTypeInstance, tags)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("karpenter.k8s.aws/" + cluster),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeG5Xlarge},
		TagSpecifications:  ec2TagSpec(ec2types.ResourceTypeLaunchTemplate, tags)}); err != nil {
		t.Fatal(err)
	}
	profile := aws.String(cluster + "_karpenter")
	if _, err := c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: profile,
		Tags: iamTags(map[string]string{clusterOwnedTag(cluster): "owned", eksClusterNameTag: cluster, karpenterNodeClassTag: "gpu",
			"topology.kubernetes.io/region": testenv.Region})}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: profile, RoleName: aws.String(nodeRole)}); err != nil {
		t.Fatal(err)
	}
	if nodes, err := c.karpenterNodes(ctx, cluster, "pending", "running"); err != nil || len(nodes) != 1 {
		t.Fatalf("%d of Karpenter's instances planted (%v), want 1", len(nodes), err)
	}
}
