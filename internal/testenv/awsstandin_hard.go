// The stand-in's default behaviour is AWS's hardest documented behaviour
// (DESIGN.md decision 13): eventual states after deletes, a missing cluster
// answered as a ClientException, refused deletes while dependencies remain,
// the interfaces the VPC CNI leaks, access entries EKS makes itself, version
// upgrades that take several polls and refuse a second update meanwhile, and
// GPU capacity that a zone does not have. Each behaviour cites its source.

package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Polls of the transient states the stand-in reports by default. Small, so
// waiters are exercised without lengthening the tests: they poll every few
// milliseconds.
const (
	// deletePolls: DELETING after a delete call, before the object is gone.
	deletePolls = 2
	// updatePolls: an EKS update InProgress and its object UPDATING.
	updatePolls = 3
	// degradedPolls: an add-on that needs nodes DEGRADED before ACTIVE.
	degradedPolls = 2
)

// NoGPUCapacityZone is the zone where the stand-in has no g5 capacity: a g5
// node group whose subnets are all in it fails as EKS reports an Auto
// Scaling group that cannot launch (see noCapacity).
const NoGPUCapacityZone = "us-west-2c"

// standInHard is the state of the hard defaults.
type standInHard struct {
	// notFound counts DescribeCluster answers for a missing cluster, by name.
	notFound map[string]int
	// sgAfter is the cluster security group EKS deletes once the cluster is
	// gone, by cluster key.
	sgAfter map[string]string
}

func (s *AWSStandIn) hardState() *standInHard {
	if s.hard.notFound == nil {
		s.hard.notFound, s.hard.sgAfter = map[string]int{}, map[string]string{}
	}
	return &s.hard
}

// serveHard answers the calls AWS refuses where moto would accept them;
// false leaves the call to the rest of the stand-in.
func (s *AWSStandIn) serveHard(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	switch req.op {
	case "DeleteSubnet", "DeleteVpc", "DeleteSecurityGroup":
		return s.refuseWhileDependents(w, r, req)
	case "DeleteCluster":
		// EKS refuses to delete a cluster with node groups, including ones
		// still DELETING: "Cluster has nodegroups attached" (the message
		// moto's eks/models.py took from the real API); terraform-provider-aws
		// deletes node groups first and waits until they are gone.
		if ng := s.nodegroupLeft(req.cluster); ng != "" {
			writeAWSError(w, "eks", http.StatusConflict, "ResourceInUseException", "Cluster has nodegroups attached ("+ng+" is DELETING)")
			return true
		}
	case "UpdateClusterVersion", "UpdateClusterConfig":
		if s.busy("cluster/" + req.cluster) {
			s.refuseConcurrentUpdate(w, "cluster "+req.cluster)
			return true
		}
	case "UpdateNodegroupVersion", "UpdateNodegroupConfig":
		if s.busy("nodegroup/" + req.cluster + "/" + req.nodegroup) {
			s.refuseConcurrentUpdate(w, "node group "+req.nodegroup)
			return true
		}
	}
	return false
}

// refuseConcurrentUpdate: EKS runs one update of an object at a time and
// answers a second with ResourceInUseException (EKS API reference,
// UpdateClusterVersion and UpdateClusterConfig errors; terraform-provider-aws
// cluster.go retries DeleteCluster's ResourceInUseException "in progress").
func (s *AWSStandIn) refuseConcurrentUpdate(w http.ResponseWriter, what string) {
	writeAWSError(w, "eks", http.StatusConflict, "ResourceInUseException", "An update is already in progress for "+what)
}

// busy reports whether the object answers UPDATING; the caller does not hold s.mu.
func (s *AWSStandIn) busy(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	inj := s.statuses[key]
	return inj != nil && inj.status == "UPDATING" && inj.left != 0
}

// nodegroupLeft names a node group of the cluster still DELETING, or "".
func (s *AWSStandIn) nodegroupLeft(cluster string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if left := s.deletingNodegroups(cluster); len(left) > 0 {
		return left[0]
	}
	return ""
}

// deletingNodegroups names the cluster's node groups still DELETING (moto
// has removed them already); the caller holds s.mu.
func (s *AWSStandIn) deletingNodegroups(cluster string) []string {
	prefix := "nodegroup/" + cluster + "/"
	var out []string
	for key, inj := range s.statuses {
		if strings.HasPrefix(key, prefix) && inj.status == "DELETING" && (inj.left != 0 || len(inj.lead) > 0) {
			out = append(out, strings.TrimPrefix(key, prefix))
		}
	}
	slices.Sort(out)
	return out
}

// withDeletingNodegroups lists node groups still DELETING as EKS does until
// they are gone (ListNodegroups).
func (s *AWSStandIn) withDeletingNodegroups(cluster string, body []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	names, _ := doc["nodegroups"].([]any)
	s.mu.Lock()
	for _, n := range s.deletingNodegroups(cluster) {
		if !slices.Contains(names, any(n)) {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	doc["nodegroups"] = names
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// settle marks an object DELETING after its delete call, as AWS does for
// minutes, after first answering with the state it had: a describe right
// after DeleteCluster can still read ACTIVE (terraform-provider-aws
// eks/cluster.go waitClusterDeleted and node_group.go waitNodegroupDeleted
// both wait through ACTIVE as well as DELETING). A count a test injected
// with ClusterDeleting or NodegroupDeleting replaces the default. The
// caller holds s.mu.
func (s *AWSStandIn) settle(key string, last map[string]any) {
	n, injected := s.deleting[key]
	delete(s.deleting, key)
	if !injected {
		n = deletePolls
	}
	var lead []string
	if st, _ := last["status"].(string); st != "" && st != "DELETING" && !injected {
		lead = []string{st}
	}
	s.statuses[key] = &injectedStatus{status: "DELETING", left: n, lead: lead}
}

// missingCluster answers DescribeCluster for a cluster moto does not know.
// EKS "sometimes" answers ClientException: No cluster found for name
// (terraform-provider-aws eks/cluster.go findClusterByName treats it as not
// found); the stand-in does so every other time, first time included. Once
// the cluster is gone, EKS deletes the cluster security group it made
// (it outlives the cluster, EKS user guide "sec-group-reqs"), unless the
// VPC CNI's leaked interfaces still use it, as they can for good
// (aws/amazon-vpc-cni-k8s#1223).
func (s *AWSStandIn) missingCluster(w http.ResponseWriter, r *http.Request, cluster string) bool {
	s.mu.Lock()
	h := s.hardState()
	h.notFound[cluster]++
	client := h.notFound[cluster]%2 == 1
	key := clusterKey(regionOf(r), cluster)
	sg := h.sgAfter[key]
	delete(h.sgAfter, key)
	s.mu.Unlock()
	if id, _, _ := strings.Cut(sg, "@"); id != "" && len(s.enis(r, "group-id", id)) == 0 {
		_ = s.ec2Call(r, url.Values{"Action": {"DeleteSecurityGroup"}, "GroupId": {id}}, nil)
	}
	if !client {
		return false
	}
	writeAWSError(w, "eks", http.StatusBadRequest, "ClientException", "No cluster found for name: "+cluster+".")
	return true
}

// enis are the network interfaces moto holds that match one EC2 filter.
func (s *AWSStandIn) enis(r *http.Request, filter, value string) []string {
	var out struct {
		Items []struct {
			ID     string `xml:"networkInterfaceId"`
			Status string `xml:"status"`
		} `xml:"networkInterfaceSet>item"`
	}
	if s.ec2Call(r, url.Values{"Action": {"DescribeNetworkInterfaces"}, "Filter.1.Name": {filter}, "Filter.1.Value.1": {value}}, &out) != nil {
		return nil
	}
	var ids []string
	for _, it := range out.Items {
		ids = append(ids, it.ID+" ("+it.Status+")")
	}
	return ids
}

// endpoints are the VPC endpoints moto holds in a VPC.
func (s *AWSStandIn) endpoints(r *http.Request, vpc string) []string {
	var out struct {
		Items []struct {
			ID    string `xml:"vpcEndpointId"`
			State string `xml:"state"`
		} `xml:"vpcEndpointSet>item"`
	}
	if s.ec2Call(r, url.Values{"Action": {"DescribeVpcEndpoints"}, "Filter.1.Name": {"vpc-id"}, "Filter.1.Value.1": {vpc}}, &out) != nil {
		return nil
	}
	var ids []string
	for _, it := range out.Items {
		if !strings.EqualFold(it.State, "deleted") {
			ids = append(ids, it.ID)
		}
	}
	return ids
}

// refuseWhileDependents: EC2 refuses to delete a subnet, security group or
// VPC while network interfaces (or, for a VPC, endpoints) remain in it, with
// DependencyViolation ("The subnet 'subnet-…' has dependencies and cannot be
// deleted", EC2 API reference DeleteSubnet/DeleteVpc/DeleteSecurityGroup);
// moto checks none of it. Leaked VPC CNI interfaces keep it so for good
// (aws/amazon-vpc-cni-k8s#1223, #608).
func (s *AWSStandIn) refuseWhileDependents(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	form, _ := url.ParseQuery(string(req.body))
	var id, filter, noun string
	switch req.op {
	case "DeleteSubnet":
		id, filter, noun = form.Get("SubnetId"), "subnet-id", "subnet"
	case "DeleteVpc":
		id, filter, noun = form.Get("VpcId"), "vpc-id", "vpc"
	case "DeleteSecurityGroup":
		id, filter, noun = form.Get("GroupId"), "group-id", "security group"
	}
	if id == "" {
		return false
	}
	left := s.enis(r, filter, id)
	if req.op == "DeleteVpc" {
		left = append(left, s.endpoints(r, id)...)
	}
	if len(left) == 0 {
		return false
	}
	writeAWSError(w, "ec2", http.StatusBadRequest, "DependencyViolation",
		fmt.Sprintf("The %s '%s' has dependencies and cannot be deleted. (stand-in: %s)", noun, id, strings.Join(left, ", ")))
	return true
}

// leakENIs leaves, after a node group's delete, one VPC CNI interface per
// subnet of the group in state available, tagged as the CNI tags its own
// and in the cluster security group, as the VPC CNI does when a node goes
// before ipamd released them (aws/amazon-vpc-cni-k8s#1223, #608; EKS user
// guide "Delete a cluster": delete leftover network interfaces).
func (s *AWSStandIn) leakENIs(r *http.Request, cluster string, node map[string]any) {
	subnets, _ := node["subnets"].([]any)
	s.mu.Lock()
	sg := s.ext().clusterSG[clusterKey(regionOf(r), cluster)]
	s.mu.Unlock()
	sgID, _, _ := strings.Cut(sg, "@")
	for _, sn := range subnets {
		form := url.Values{"Action": {"CreateNetworkInterface"}, "SubnetId": {fmt.Sprint(sn)}, "Description": {"aws-K8S-i-0standin" + standInID("", 8)},
			"TagSpecification.1.ResourceType": {"network-interface"},
			"TagSpecification.1.Tag.1.Key":    {"node.k8s.amazonaws.com/instance_id"},
			"TagSpecification.1.Tag.1.Value":  {"i-0standin" + standInID("", 8)},
		}
		if sgID != "" {
			form.Set("SecurityGroupId.1", sgID)
		}
		_ = s.ec2Call(r, form, nil)
	}
}

// noCapacity fails a new g5 node group whose subnets all lie in
// NoGPUCapacityZone, as EKS reports a node group whose Auto Scaling group
// cannot launch: CREATE_FAILED with health issue AsgInstanceLaunchFailures
// carrying EC2's InsufficientInstanceCapacity (EKS API reference, Issue
// codes; EKS user guide "Troubleshoot managed node groups"), the commonest
// failure of a first GPU apply. The caller holds no lock.
func (s *AWSStandIn) noCapacity(r *http.Request, req awsRequest) {
	var in struct {
		NodegroupName string   `json:"nodegroupName"`
		InstanceTypes []string `json:"instanceTypes"`
		Subnets       []string `json:"subnets"`
	}
	if json.Unmarshal(req.body, &in) != nil || len(in.InstanceTypes) == 0 || !strings.HasPrefix(in.InstanceTypes[0], "g5.") || len(in.Subnets) == 0 {
		return
	}
	form := url.Values{"Action": {"DescribeSubnets"}}
	for i, sn := range in.Subnets {
		form.Set("SubnetId."+strconv.Itoa(i+1), sn)
	}
	var out struct {
		Zones []string `xml:"subnetSet>item>availabilityZone"`
	}
	if s.ec2Call(r, form, &out) != nil || len(out.Zones) == 0 || slices.ContainsFunc(out.Zones, func(z string) bool { return z != NoGPUCapacityZone }) {
		return
	}
	msg := fmt.Sprintf("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). "+
		"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing us-west-2a, us-west-2b. Launching EC2 instance failed.",
		in.InstanceTypes[0], NoGPUCapacityZone, in.InstanceTypes[0])
	s.inject("nodegroup/"+req.cluster+"/"+in.NodegroupName, "CREATE_FAILED", -1,
		[]HealthIssue{{Code: "AsgInstanceLaunchFailures", Message: msg, ResourceIDs: []string{"eks-" + in.NodegroupName + "-asg"}}})
}

// autoAccessEntries makes the access entries EKS creates by itself: for the
// node role of a managed node group, type EC2_LINUX (EKS user guide "Create
// access entries": "Amazon EKS automatically creates access entries for the
// IAM roles of managed node groups"); and, with
// bootstrapClusterCreatorAdminPermissions (true unless set false), one for
// the identity that created the cluster with AmazonEKSClusterAdminPolicy
// (EKS API reference, CreateAccessConfigRequest).
func (s *AWSStandIn) autoAccessEntries(r *http.Request, req awsRequest) {
	switch req.op {
	case "CreateCluster":
		var in struct {
			Name   string `json:"name"`
			Access *struct {
				Bootstrap *bool `json:"bootstrapClusterCreatorAdminPermissions"`
			} `json:"accessConfig"`
		}
		_ = json.Unmarshal(req.body, &in)
		if in.Access != nil && in.Access.Bootstrap != nil && !*in.Access.Bootstrap {
			return
		}
		creator := s.callerPrincipal(r)
		if creator == "" {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.newEntry(r, in.Name, creator, "STANDARD", nil)
		now := float64(time.Now().Unix())
		e.Policies = []map[string]any{{"policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
			"accessScope": map[string]any{"type": "cluster", "namespaces": []string{}}, "associatedAt": now, "modifiedAt": now}}
	case "CreateNodegroup":
		var in struct {
			NodeRole string `json:"nodeRole"`
		}
		_ = json.Unmarshal(req.body, &in)
		if in.NodeRole == "" {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.entries[req.cluster][in.NodeRole] == nil {
			e := s.newEntry(r, req.cluster, in.NodeRole, "EC2_LINUX", []string{"system:nodes"})
			e.Entry["username"] = "system:node:{{EC2PrivateDNSName}}"
		}
	}
}

// newEntry records an access entry without tags; the caller holds s.mu.
func (s *AWSStandIn) newEntry(r *http.Request, cluster, principal, kind string, groups []string) *accessEntry {
	if s.entries[cluster] == nil {
		s.entries[cluster] = map[string]*accessEntry{}
	}
	if groups == nil {
		groups = []string{}
	}
	now := float64(time.Now().Unix())
	e := &accessEntry{Entry: map[string]any{"clusterName": cluster, "principalArn": principal, "type": kind, "tags": map[string]string{},
		"username": principal, "kubernetesGroups": groups, "createdAt": now, "modifiedAt": now,
		"accessEntryArn": "arn:aws:eks:" + regionOf(r) + ":123456789012:access-entry/" + cluster + "/" + principal}}
	s.entries[cluster][principal] = e
	return e
}

// callerPrincipal is the IAM principal of the request's credentials, as
// moto's STS GetCallerIdentity names it, with an assumed-role session
// mapped to its role as EKS records the creator.
func (s *AWSStandIn) callerPrincipal(r *http.Request) string {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, s.moto.URL+"/", strings.NewReader("Action=GetCallerIdentity&Version=2011-06-15"))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// The caller's own key, signed for STS: moto names the caller by the key.
	req.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/eks/aws4_request", "/sts/aws4_request", 1))
	var out struct {
		ARN string `xml:"GetCallerIdentityResult>Arn"`
	}
	if err := s.do(req, &out); err != nil || out.ARN == "" {
		return ""
	}
	if a := strings.Split(out.ARN, ":"); len(a) == 6 && a[2] == "sts" && strings.HasPrefix(a[5], "assumed-role/") {
		return "arn:" + a[1] + ":iam::" + a[4] + ":role/" + strings.Split(a[5], "/")[1]
	}
	return out.ARN
}

// describeVersions serves DescribeClusterVersions as EKS does: in pages
// (maxResults, nextToken; the CLI reference calls it a paginated
// operation), and versions in extended support only with includeAll (EKS
// API reference: "Include all available versions in the response").
func (s *AWSStandIn) describeVersions(w http.ResponseWriter, q url.Values) {
	s.mu.Lock()
	all := append([]string(nil), s.versions...)
	s.mu.Unlock()
	includeAll := q.Get("includeAll") == "true"
	var vs []map[string]any
	for i, v := range all {
		status := "STANDARD_SUPPORT"
		if i == 0 && len(all) > 2 {
			// The oldest version is in extended support.
			status = "EXTENDED_SUPPORT"
		}
		if status != "STANDARD_SUPPORT" && !includeAll {
			continue
		}
		vs = append(vs, map[string]any{"clusterVersion": v, "clusterType": "eks", "status": strings.ToLower(strings.ReplaceAll(status, "_", "-")), "versionStatus": status,
			"defaultVersion": v == all[len(all)-1]})
	}
	size := 2
	if n, err := strconv.Atoi(q.Get("maxResults")); err == nil && n > 0 && n < size {
		size = n
	}
	start, _ := strconv.Atoi(q.Get("nextToken"))
	start = min(start, len(vs))
	end := min(start+size, len(vs))
	out := map[string]any{"clusterVersions": vs[start:end]}
	if end < len(vs) {
		out["nextToken"] = strconv.Itoa(end)
	}
	writeJSON(w, out)
}

// newerVersion reports whether Kubernetes version a is newer than b.
func newerVersion(a, b string) bool {
	var aMaj, aMin, bMaj, bMin int
	if _, err := fmt.Sscanf(a, "%d.%d", &aMaj, &aMin); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &bMaj, &bMin); err != nil {
		return false
	}
	return aMaj > bMaj || (aMaj == bMaj && aMin > bMin)
}

// versionStep checks an upgrade as EKS does: one minor version at a time,
// never down ("Unsupported Kubernetes minor version update from 1.33 to
// 1.35", EKS user guide "Update existing cluster to new Kubernetes
// version"); "" when allowed.
func versionStep(from, to string) string {
	var fMaj, fMin, tMaj, tMin int
	if _, err := fmt.Sscanf(from, "%d.%d", &fMaj, &fMin); err != nil {
		return ""
	}
	if _, err := fmt.Sscanf(to, "%d.%d", &tMaj, &tMin); err != nil || tMaj != fMaj || tMin != fMin+1 {
		return fmt.Sprintf("Unsupported Kubernetes minor version update from %s to %s", from, to)
	}
	return ""
}

// serveAccessEntryTags tags access entries, which moto does not know
// (ARN arn:PARTITION:eks:REGION:ACCOUNT:access-entry/CLUSTER/PRINCIPAL).
func (s *AWSStandIn) serveAccessEntryTags(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	arn, _ := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/tags/"))
	_, rest, ok := strings.Cut(arn, ":access-entry/")
	cluster, principal, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[cluster][principal]
	if e == nil {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "stand-in: no access entry "+rest)
		return true
	}
	tags := map[string]string{}
	if t, ok := e.Entry["tags"].(map[string]string); ok && t != nil {
		tags = t
	}
	tags = applyTagOp(r, req, tags)
	e.Entry["tags"] = tags
	writeJSON(w, map[string]any{"tags": tags})
	return true
}
