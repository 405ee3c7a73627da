package testenv

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// standInExt is the state of the stand-in's parts for what moto lacks
// beyond access entries and versions: EKS update ids (DescribeUpdate), the
// cluster security group EKS creates, EKS add-ons, FSx lifecycle and mount
// names, data repository associations, and a timeline of lifecycle events
// for tests that assert what ran at the same time. Maps are made on first use.
type standInExt struct {
	updates    map[string]*standInUpdate
	failUpdate map[string]standInUpdate
	rejects    map[string]*standInReject
	clusterSG  map[string]string
	timeline   []StandInEvent
	addons     map[string]map[string]*standInAddon
	fs         map[string]*standInFS
	dras       map[string]*standInDRA
	fsGate     string
	fsPolls    int
	draPolls   int
	addonPolls int
	// endpoints are the states VPC endpoints report before moto's (awsstandin_s3.go).
	endpoints map[string]*endpointPhase
	// policies are S3 bucket policies as written, by bucket (awsstandin_s3.go).
	policies map[string]string
}

// StandInEvent is one moment the stand-in saw: a create accepted or an
// object first reported in its final state.
type StandInEvent struct {
	What string
	At   time.Time
}

type standInUpdate struct {
	id, status string
	left       int
	errors     []map[string]any
}

// ext initialises the extension's maps; the caller holds s.mu.
func (s *AWSStandIn) ext() *standInExt {
	e := &s.more
	if e.updates == nil {
		e.updates, e.failUpdate, e.clusterSG = map[string]*standInUpdate{}, map[string]standInUpdate{}, map[string]string{}
		e.rejects = map[string]*standInReject{}
		e.addons, e.fs, e.dras = map[string]map[string]*standInAddon{}, map[string]*standInFS{}, map[string]*standInDRA{}
		e.fsPolls, e.draPolls, e.addonPolls = 2, 2, 1
	}
	return e
}

// mark records an event once; the caller holds s.mu.
func (s *AWSStandIn) mark(what string) {
	if !s.seen(what) {
		s.ext().timeline = append(s.ext().timeline, StandInEvent{What: what, At: time.Now()})
	}
}

// seen reports whether an event was recorded; the caller holds s.mu.
func (s *AWSStandIn) seen(what string) bool {
	for _, ev := range s.ext().timeline {
		if ev.What == what {
			return true
		}
	}
	return false
}

// EventTime is when the stand-in first saw what, e.g. "CreateCluster demo",
// "cluster demo ACTIVE", "CreateFileSystem fs-1234", "fs-1234 AVAILABLE".
func (s *AWSStandIn) EventTime(what string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.ext().timeline {
		if ev.What == what {
			return ev.At, true
		}
	}
	return time.Time{}, false
}

// Timeline is every event recorded so far, in order.
func (s *AWSStandIn) Timeline() []StandInEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StandInEvent(nil), s.ext().timeline...)
}

// FailNextUpdate makes the next EKS update of the operation (e.g.
// "UpdateNodegroupConfig") end Failed with the error, after one InProgress
// answer, as EKS reports an update it could not apply.
func (s *AWSStandIn) FailNextUpdate(op, code, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ext().failUpdate[op] = standInUpdate{status: "Failed", errors: []map[string]any{{"errorCode": code, "errorMessage": msg, "resourceIds": []string{}}}}
}

// newUpdate records an EKS update that answers InProgress for updatePolls
// polls and then its final status, and returns its description; the caller
// holds s.mu.
func (s *AWSStandIn) newUpdate(op, kind string, params []map[string]string) map[string]any {
	e := s.ext()
	u := &standInUpdate{id: fmt.Sprintf("stand-in-%d", time.Now().UnixNano()), status: "Successful", left: updatePolls}
	if f, ok := e.failUpdate[op]; ok {
		delete(e.failUpdate, op)
		u.status, u.errors = f.status, f.errors
	}
	e.updates[u.id] = u
	return map[string]any{"id": u.id, "status": "InProgress", "type": kind, "params": params, "createdAt": float64(time.Now().Unix()), "errors": []any{}}
}

func (s *AWSStandIn) serveDescribeUpdate(w http.ResponseWriter, id string) {
	s.settleAutoMode()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.ext().updates[id]
	if u == nil {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "stand-in: no update "+id)
		return
	}
	status, errs := u.status, u.errors
	if u.left > 0 {
		u.left--
		status, errs = "InProgress", nil
	}
	if errs == nil {
		errs = []map[string]any{}
	}
	writeJSON(w, map[string]any{"update": map[string]any{"id": id, "status": status, "errors": errs, "createdAt": float64(time.Now().Unix())}})
}

// eksMissingOperation names the EKS operations moto lacks whose paths the
// access-entry routing would misread; false leaves the request to it.
func eksMissingOperation(m string, seg []string, req *awsRequest) bool {
	switch {
	case len(seg) == 2 && seg[0] == "addons" && seg[1] == "supported-versions":
		req.op = "DescribeAddonVersions"
	case len(seg) == 4 && seg[0] == "clusters" && seg[2] == "updates" && m == http.MethodGet:
		req.op, req.principal = "DescribeUpdate", seg[3]
	case len(seg) >= 3 && seg[0] == "clusters" && seg[2] == "addons":
		req.cluster = seg[1]
		switch {
		case len(seg) == 3:
			req.op = map[string]string{"POST": "CreateAddon", "GET": "ListAddons"}[m]
		case len(seg) == 4:
			req.nodegroup = seg[3] // the add-on name
			req.op = map[string]string{"GET": "DescribeAddon", "DELETE": "DeleteAddon"}[m]
		case seg[4] == "update":
			req.nodegroup = seg[3]
			req.op = "UpdateAddon"
		}
	default:
		return false
	}
	return true
}

type standInReject struct {
	code, msg string
	left      int
}

// RejectWith makes the next n calls of an operation moto would serve (e.g.
// "CreateCluster", "CreateNodegroup") fail with an AWS error of the given
// code and message, such as the InvalidParameterException EKS answers while
// a new IAM role has not propagated.
func (s *AWSStandIn) RejectWith(op, code, msg string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ext().rejects[op] = &standInReject{code: code, msg: msg, left: n}
}

// serveMissing answers the operations moto lacks that this file family adds,
// and the rejections RejectWith injects.
func (s *AWSStandIn) serveMissing(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	s.mu.Lock()
	rej := s.ext().rejects[req.op]
	if rej != nil && rej.left > 0 {
		rej.left--
	} else {
		rej = nil
	}
	s.mu.Unlock()
	if rej != nil {
		writeAWSError(w, req.service, http.StatusBadRequest, rej.code, rej.msg)
		return true
	}
	switch req.op {
	case "DescribeUpdate":
		s.serveDescribeUpdate(w, req.principal)
		return true
	case "DescribeAddonVersions", "CreateAddon", "ListAddons", "DescribeAddon", "DeleteAddon", "UpdateAddon":
		s.serveAddons(w, r, req)
		return true
	case "UpdateFileSystem", "CreateDataRepositoryAssociation", "DescribeDataRepositoryAssociations", "DeleteDataRepositoryAssociation":
		s.serveFSx(w, req)
		return true
	}
	return false
}

// patchForwarded completes moto's answers where AWS says more: update ids,
// the cluster security group, FSx lifecycle and mount names.
func (s *AWSStandIn) patchForwarded(r *http.Request, req awsRequest, body []byte) []byte {
	switch req.op {
	case "CreateCluster":
		var in struct {
			Name string `json:"name"`
			VPC  struct {
				SubnetIDs []string `json:"subnetIds"`
			} `json:"resourcesVpcConfig"`
		}
		_ = json.Unmarshal(req.body, &in)
		s.createClusterSG(r, in.Name, in.VPC.SubnetIDs)
		s.autoAccessEntries(r, req)
		s.mu.Lock()
		s.mark("CreateCluster " + in.Name)
		s.mu.Unlock()
		s.recordAutoMode(r, in.Name, req.body)
		return s.withAutoMode(regionOf(r), in.Name, s.withClusterSG(clusterKey(regionOf(r), in.Name), body))
	case "DescribeCluster":
		var doc struct {
			Cluster struct {
				Status string `json:"status"`
			} `json:"cluster"`
		}
		if json.Unmarshal(body, &doc) == nil && doc.Cluster.Status == "ACTIVE" {
			s.mu.Lock()
			s.mark("cluster " + req.cluster + " ACTIVE")
			s.mu.Unlock()
		}
		return s.withAutoMode(regionOf(r), req.cluster, s.withClusterSG(clusterKey(regionOf(r), req.cluster), body))
	case "CreateNodegroup":
		s.noCapacity(r, req)
		s.launchIntoReservation(r, req)
		s.autoAccessEntries(r, req)
	case "ListNodegroups":
		return s.withDeletingNodegroups(req.cluster, body)
	case "DeleteNodegroup":
		var doc struct {
			Nodegroup map[string]any `json:"nodegroup"`
		}
		if json.Unmarshal(body, &doc) == nil {
			s.leakENIs(r, req.cluster, doc.Nodegroup)
		}
		s.releaseReservation(req)
	case "DeleteCluster":
		key := clusterKey(regionOf(r), req.cluster)
		s.mu.Lock()
		delete(s.ext().addons, key)
		// EKS deletes the cluster security group after the cluster, not with it.
		s.hardState().sgAfter[key] = s.ext().clusterSG[key]
		delete(s.ext().clusterSG, key)
		s.mu.Unlock()
		s.deleteAutoMode(regionOf(r), req.cluster)
	case "UpdateClusterConfig", "UpdateNodegroupConfig":
		return s.withUpdateID(req, body)
	case "CreateFileSystem", "DescribeFileSystems", "DeleteFileSystem":
		return s.patchFileSystems(req, body)
	case "CreateBucket":
		s.tagNewBucket(r, req)
	case "CreateVpcEndpoint", "DeleteVpcEndpoints", "DescribeVpcEndpoints":
		return s.patchEndpoints(req, body)
	}
	return body
}

// withUpdateID replaces moto's update (none for UpdateClusterConfig, an
// instantly Successful one for node groups) with one DescribeUpdate follows.
func (s *AWSStandIn) withUpdateID(req awsRequest, body []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	kind := "ConfigUpdate"
	if u, ok := doc["update"].(map[string]any); ok && u["type"] != nil {
		kind = fmt.Sprint(u["type"])
	}
	key := "cluster/" + req.cluster
	if req.op == "UpdateNodegroupConfig" {
		key = "nodegroup/" + req.cluster + "/" + req.nodegroup
	}
	s.mu.Lock()
	doc["update"] = s.newUpdate(req.op, kind, []map[string]string{})
	s.updating(key)
	s.mu.Unlock()
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// withClusterSG adds the cluster security group and VPC that AWS reports and
// moto omits; key is the cluster's clusterKey.
func (s *AWSStandIn) withClusterSG(key string, body []byte) []byte {
	s.mu.Lock()
	sg := s.ext().clusterSG[key]
	s.mu.Unlock()
	if sg == "" {
		return body
	}
	var doc map[string]map[string]any
	if json.Unmarshal(body, &doc) != nil || doc["cluster"] == nil {
		return body
	}
	vpc, _ := doc["cluster"]["resourcesVpcConfig"].(map[string]any)
	if vpc == nil {
		vpc = map[string]any{}
	}
	id, vpcID, _ := strings.Cut(sg, "@")
	vpc["clusterSecurityGroupId"] = id
	if vpc["vpcId"] == nil {
		vpc["vpcId"] = vpcID
	}
	doc["cluster"]["resourcesVpcConfig"] = vpc
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// createClusterSG makes the security group EKS creates with every cluster
// (for the control plane and managed nodes) in the cluster's VPC.
func (s *AWSStandIn) createClusterSG(r *http.Request, cluster string, subnets []string) {
	if len(subnets) == 0 {
		return
	}
	var sn struct {
		VPC string `xml:"subnetSet>item>vpcId"`
	}
	if s.ec2Call(r, url.Values{"Action": {"DescribeSubnets"}, "SubnetId.1": {subnets[0]}}, &sn) != nil || sn.VPC == "" {
		return
	}
	var sg struct {
		ID string `xml:"groupId"`
	}
	// EKS names it eks-cluster-sg-NAME-UNIQUEID (EKS user guide "View Amazon
	// EKS security group requirements for clusters"): never findable by name.
	err := s.ec2Call(r, url.Values{"Action": {"CreateSecurityGroup"}, "GroupName": {"eks-cluster-sg-" + cluster + "-" + standInDigits(10)}, "VpcId": {sn.VPC},
		"GroupDescription":                {"EKS created security group applied to ENI that is attached to EKS Control Plane master nodes"},
		"TagSpecification.1.ResourceType": {"security-group"},
		"TagSpecification.1.Tag.1.Key":    {"kubernetes.io/cluster/" + cluster},
		"TagSpecification.1.Tag.1.Value":  {"owned"},
	}, &sg)
	if err != nil || sg.ID == "" {
		return
	}
	s.mu.Lock()
	s.ext().clusterSG[clusterKey(regionOf(r), cluster)] = sg.ID + "@" + sn.VPC
	s.mu.Unlock()
}

var credentialRegion = regexp.MustCompile(`Credential=[^/]+/[^/]+/([^/]+)/`)

// regionOf is the region a request is signed for.
func regionOf(r *http.Request) string {
	if m := credentialRegion.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return Region
}

// clusterKey names a cluster in the stand-in's own tables: EKS names are
// unique per region only.
func clusterKey(region, cluster string) string { return region + "/" + cluster }

// ec2Call sends an EC2 query to moto in the region and account of the
// caller's request and decodes the XML answer into out.
func (s *AWSStandIn) ec2Call(r *http.Request, form url.Values, out any) error {
	return s.ec2CallIn(regionOf(r), form, out)
}

// ec2CallIn sends an EC2 query to moto in the region, as the test account.
func (s *AWSStandIn) ec2CallIn(region string, form url.Values, out any) error {
	form.Set("Version", "2016-11-15")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.moto.URL+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+AccessKey+"/20260101/"+region+"/ec2/aws4_request, SignedHeaders=host, Signature=stand-in")
	return s.do(req, out)
}

// do sends a query-protocol request to moto and decodes the XML answer into
// out (nil: ignored).
func (s *AWSStandIn) do(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("moto %s: %s: %s", req.URL, resp.Status, body)
	}
	if out == nil {
		return nil
	}
	return xml.Unmarshal(body, out)
}
