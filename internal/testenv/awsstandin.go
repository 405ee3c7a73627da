package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// AWSStandIn is a stand-in for the parts of the real AWS API that moto lacks,
// placed in front of moto: it serves EC2 capacity reservations, EKS access entries, EKS
// DescribeClusterVersions, cluster and node group version upgrades, node
// group tags and chosen Service Quotas values itself (keeping what it changed
// as an overlay on moto's descriptions) and EKS Auto Mode
// (awsstandin_automode.go), injects the lifecycle states real AWS passes through (CREATING, DELETING, CREATE_FAILED
// with health issues, DependencyViolation) and faults, answers S3 and S3
// gateway endpoints as AWS does where moto is kinder (awsstandin_s3.go),
// and forwards every other request to moto unchanged. Point every endpoint
// override at URL.
type AWSStandIn struct {
	// URL is the base endpoint for every service.
	URL  string
	moto *Moto

	mu        sync.Mutex
	calls     []string
	agents    []string // each call's User-Agent, beside calls
	userAgent string
	faults    map[string]bool
	statuses  map[string]*injectedStatus
	deleting  map[string]int
	depViol   map[string]int
	bodies    map[string]json.RawMessage
	overlay   map[string]map[string]any
	entries   map[string]map[string]*accessEntry
	quotas    map[string]float64
	versions  []string
	kube      clusterPointers
	more      standInExt
	hard      standInHard
	podIDs    podIdentities
	// capacityState is the capacity reservations (awsstandin_capacity.go).
	capacityState standInCapacity
	// publicParams are AWS's public SSM parameters a test published
	// (awsstandin_ssm.go).
	publicParams map[string]string
	// autoMode is each cluster's EKS Auto Mode (awsstandin_automode.go).
	autoMode standInAutoMode
}

// HealthIssue is an EKS health issue the stand-in reports with an injected status.
type HealthIssue struct {
	Code        string   `json:"code"`
	Message     string   `json:"message"`
	ResourceIDs []string `json:"resourceIds,omitempty"`
}

type injectedStatus struct {
	status string
	left   int // < 0: for good
	issues []HealthIssue
	// lead are statuses answered first, one per describe, before status.
	lead []string
}

type accessEntry struct {
	Entry    map[string]any
	Policies []map[string]any
}

// StartAWSStandIn starts a stand-in in front of moto for the test's duration.
func StartAWSStandIn(t testing.TB, moto *Moto) *AWSStandIn {
	t.Helper()
	s := &AWSStandIn{moto: moto, faults: map[string]bool{}, statuses: map[string]*injectedStatus{}, deleting: map[string]int{}, depViol: map[string]int{},
		bodies: map[string]json.RawMessage{}, overlay: map[string]map[string]any{}, entries: map[string]map[string]*accessEntry{}, quotas: map[string]float64{},
		versions: []string{"1.31", "1.32", "1.33", "1.34"}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Fail makes every call of the operation (e.g. "CreateNodegroup", "CreateVpc")
// fail with the error code InjectedFault until ClearFaults.
func (s *AWSStandIn) Fail(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = true
}

// ClearFaults ends every injected fault.
func (s *AWSStandIn) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string]bool{}
}

// ClusterStatus makes the next n DescribeCluster answers for the cluster
// report status (n < 0: every answer), with health issues.
func (s *AWSStandIn) ClusterStatus(cluster, status string, n int, issues ...HealthIssue) {
	s.inject("cluster/"+cluster, status, n, issues)
}

// NodegroupStatus does the same for DescribeNodegroup of one node group.
func (s *AWSStandIn) NodegroupStatus(cluster, nodegroup, status string, n int, issues ...HealthIssue) {
	s.inject("nodegroup/"+cluster+"/"+nodegroup, status, n, issues)
}

// ClusterDeleting makes the n DescribeCluster answers after the cluster's
// DeleteCluster report DELETING, from the deleted cluster's last
// description, as AWS does while it tears a control plane down.
func (s *AWSStandIn) ClusterDeleting(cluster string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleting["cluster/"+cluster] = n
}

// NodegroupDeleting does the same for a node group after its DeleteNodegroup.
func (s *AWSStandIn) NodegroupDeleting(cluster, nodegroup string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleting["nodegroup/"+cluster+"/"+nodegroup] = n
}

func (s *AWSStandIn) inject(key, status string, n int, issues []HealthIssue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[key] = &injectedStatus{status: status, left: n, issues: issues}
}

// DependencyViolations makes the next n calls of a delete operation (e.g.
// "DeleteSubnet") fail with DependencyViolation, as EC2 does while ENIs linger.
func (s *AWSStandIn) DependencyViolations(op string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.depViol[op] = n
}

// SetQuota makes Service Quotas answer value for the ec2 quota code; other
// codes go to moto, which knows only VPC quotas.
func (s *AWSStandIn) SetQuota(code string, value float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas[code] = value
}

// Calls are the operations received so far, in order, injected faults included.
func (s *AWSStandIn) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// CallsBy are the operations received so far from clients whose
// User-Agent holds agent (the provider's, say, beside Karpenter's).
func (s *AWSStandIn) CallsBy(agent string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, op := range s.calls {
		if strings.Contains(s.agents[i], agent) {
			out = append(out, op)
		}
	}
	return out
}

// LastUserAgent is the User-Agent of the latest request.
func (s *AWSStandIn) LastUserAgent() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userAgent
}

// ResetCalls forgets the calls received so far.
func (s *AWSStandIn) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.agents = nil, nil
}

// AccessEntries lists the principals with an access entry on the cluster, sorted.
func (s *AWSStandIn) AccessEntries(cluster string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for p := range s.entries[cluster] {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// AccessEntryType is the type of a principal's access entry (STANDARD,
// EC2_LINUX, ...), "" when it has none.
func (s *AWSStandIn) AccessEntryType(cluster, principal string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[cluster][principal]; e != nil {
		return fmt.Sprint(e.Entry["type"])
	}
	return ""
}

// awsRequest is what the stand-in needs to know about one call.
type awsRequest struct {
	service, op string
	cluster     string
	nodegroup   string
	principal   string
	// bucket is the S3 bucket of a path-style S3 call.
	bucket string
	body   []byte
}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request`)

func (s *AWSStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := classify(r, body)
	s.mu.Lock()
	s.calls = append(s.calls, req.op)
	s.userAgent = r.Header.Get("User-Agent")
	s.agents = append(s.agents, s.userAgent)
	fault := s.faults[req.op]
	violate := s.depViol[req.op] > 0
	if violate {
		s.depViol[req.op]--
	}
	s.mu.Unlock()
	switch {
	case fault:
		writeAWSError(w, req.service, http.StatusBadRequest, "InjectedFault", "stand-in: injected fault in "+req.op)
		return
	case violate:
		writeAWSError(w, req.service, http.StatusBadRequest, "DependencyViolation", "stand-in: resource has a dependent object")
		return
	}
	if s.serveHard(w, r, req) {
		return
	}
	if s.serveOwn(w, r, req) {
		return
	}
	s.forward(w, r, req)
}

// classify names the operation from the signing scope and the protocol:
// Action for EC2, IAM and STS (query), X-Amz-Target for Service Quotas (JSON),
// method and path for EKS (REST), method, path and query for S3 (REST).
func classify(r *http.Request, body []byte) awsRequest {
	req := awsRequest{body: body}
	if m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		req.service = m[1]
	}
	switch {
	case r.Header.Get("X-Amz-Target") != "":
		t := r.Header.Get("X-Amz-Target")
		req.op = t[strings.LastIndex(t, ".")+1:]
	case req.service == "eks":
		eksOperation(r, &req)
	case req.service == "s3":
		s3Operation(r, &req)
	default:
		form, _ := url.ParseQuery(string(body))
		req.op = form.Get("Action")
	}
	return req
}

func eksOperation(r *http.Request, req *awsRequest) {
	var seg []string
	for _, p := range strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		u, _ := url.PathUnescape(p)
		seg = append(seg, u)
	}
	m := r.Method
	if len(seg) >= 2 && seg[0] == "clusters" {
		req.cluster = seg[1]
	}
	if eksMissingOperation(m, seg, req) || eksPodIdentityOperation(m, seg, req) {
		return
	}
	switch {
	case seg[0] == "cluster-versions":
		req.op = "DescribeClusterVersions"
	case seg[0] == "tags":
		req.op = map[string]string{"POST": "TagResource", "GET": "ListTagsForResource", "DELETE": "UntagResource"}[m]
	case len(seg) == 1:
		req.op = map[string]string{"POST": "CreateCluster", "GET": "ListClusters"}[m]
	case len(seg) == 2:
		req.op = map[string]string{"GET": "DescribeCluster", "DELETE": "DeleteCluster"}[m]
	case seg[2] == "updates":
		req.op = map[string]string{"POST": "UpdateClusterVersion", "GET": "ListUpdates"}[m]
	case seg[2] == "update-config":
		req.op = "UpdateClusterConfig"
	case seg[2] == "node-groups" && len(seg) == 3:
		req.op = map[string]string{"POST": "CreateNodegroup", "GET": "ListNodegroups"}[m]
	case seg[2] == "node-groups":
		req.nodegroup = seg[3]
		switch {
		case len(seg) == 4:
			req.op = map[string]string{"GET": "DescribeNodegroup", "DELETE": "DeleteNodegroup"}[m]
		case seg[4] == "update-config":
			req.op = "UpdateNodegroupConfig"
		case seg[4] == "update-version":
			req.op = "UpdateNodegroupVersion"
		}
	case seg[2] == "access-entries" && len(seg) == 3:
		req.op = map[string]string{"POST": "CreateAccessEntry", "GET": "ListAccessEntries"}[m]
	case seg[2] == "access-entries":
		req.principal = seg[3]
		if len(seg) == 4 {
			req.op = map[string]string{"GET": "DescribeAccessEntry", "DELETE": "DeleteAccessEntry", "POST": "UpdateAccessEntry"}[m]
		} else {
			req.op = map[string]string{"POST": "AssociateAccessPolicy", "GET": "ListAssociatedAccessPolicies", "DELETE": "DisassociateAccessPolicy"}[m]
		}
	}
	if req.op == "" {
		req.op = m + " " + r.URL.Path
	}
}

// writeAWSError answers in the error format of the service's protocol, so
// the SDK decodes the code as it would from AWS.
func writeAWSError(w http.ResponseWriter, service string, status int, code, msg string) {
	switch service {
	case "ec2":
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>stand-in</RequestID></Response>`, code, msg)
	case "iam", "sts":
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>stand-in</RequestId></ErrorResponse>`, code, msg)
	case "eks":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// forward sends the request to moto and relays the answer, remembering EKS
// cluster and node group descriptions for injected states.
func (s *AWSStandIn) forward(w http.ResponseWriter, r *http.Request, req awsRequest) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, s.moto.URL+r.URL.RequestURI(), bytes.NewReader(req.body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode == http.StatusNotFound && req.op == "DescribeCluster" && s.missingCluster(w, r, req.cluster) {
		return
	}
	if resp.StatusCode == http.StatusOK {
		body = s.patchForwarded(r, req, s.remember(req, body))
	}
	for k, v := range resp.Header {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

func objectKey(req awsRequest) (key, field string) {
	switch req.op {
	case "CreateCluster", "DescribeCluster", "DeleteCluster":
		return "cluster/" + req.cluster, "cluster"
	case "CreateNodegroup", "DescribeNodegroup", "DeleteNodegroup":
		return "nodegroup/" + req.cluster + "/" + req.nodegroup, "nodegroup"
	}
	return "", ""
}

// remember keeps the description of an EKS cluster or node group for
// injected states and returns the answer with the overlay applied.
func (s *AWSStandIn) remember(req awsRequest, body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	if req.op == "CreateCluster" || req.op == "CreateNodegroup" {
		var named struct {
			Name          string `json:"name"`
			NodegroupName string `json:"nodegroupName"`
		}
		_ = json.Unmarshal(req.body, &named)
		if req.op == "CreateCluster" {
			req.cluster = named.Name
		} else {
			req.nodegroup = named.NodegroupName
		}
	}
	key, field := objectKey(req)
	if key == "" || doc[field] == nil {
		return body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.op == "DeleteCluster" {
		// AWS deletes a cluster's access entries with it.
		delete(s.entries, req.cluster)
	}
	if req.op == "CreateCluster" || req.op == "CreateNodegroup" {
		// A new object under an old name starts without the old one's changes.
		delete(s.overlay, key)
	}
	var obj map[string]any
	if json.Unmarshal(doc[field], &obj) != nil {
		return body
	}
	if req.op == "DeleteCluster" || req.op == "DeleteNodegroup" {
		last := obj
		if old := s.bodies[key]; old != nil {
			_ = json.Unmarshal(old, &last)
		}
		s.settle(key, last)
	}
	s.applyOverlay(key, obj)
	patched, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	s.bodies[key] = patched
	// Only describes report (and use up) injected states: moto's current
	// description (a change behind the provider's back included) with the
	// state AWS would report.
	if req.op == "DescribeCluster" || req.op == "DescribeNodegroup" {
		if status, issues, ok := s.nextInjected(key); ok {
			obj["status"] = status
			if len(issues) > 0 {
				obj["health"] = map[string]any{"issues": issues}
			}
			if patched, err = json.Marshal(obj); err != nil {
				return body
			}
		}
	}
	doc[field] = patched
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// serveOwn answers what moto lacks and the injected states; false means forward.
func (s *AWSStandIn) serveOwn(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	switch req.op {
	case "DescribeCluster", "DescribeNodegroup":
		return s.serveInjectedStatus(w, req)
	case "DescribeClusterVersions":
		s.describeVersions(w, r.URL.Query())
		return true
	case "GetServiceQuota":
		var in struct{ ServiceCode, QuotaCode string }
		_ = json.Unmarshal(req.body, &in)
		s.mu.Lock()
		v, ok := s.quotas[in.QuotaCode]
		s.mu.Unlock()
		if !ok || in.ServiceCode != "ec2" {
			return false
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"Quota": map[string]any{"ServiceCode": "ec2", "QuotaCode": in.QuotaCode, "Value": v, "Unit": "None", "Adjustable": true}})
		return true
	case "CreateAccessEntry", "DescribeAccessEntry", "ListAccessEntries", "DeleteAccessEntry", "AssociateAccessPolicy", "ListAssociatedAccessPolicies", "DisassociateAccessPolicy":
		s.serveAccessEntries(w, r, req)
		return true
	case "UpdateClusterVersion", "UpdateNodegroupVersion":
		return s.serveVersionUpdate(w, r, req)
	case "TagResource", "UntagResource", "ListTagsForResource":
		return s.serveNodegroupTags(w, r, req) || s.serveAddonTags(w, r, req) || s.serveAccessEntryTags(w, r, req)
	}
	return s.serveAutoMode(w, r, req) || s.servePodIdentity(w, r, req) || s.serveCapacity(w, req) || s.servePricing(w, req) || s.serveSSMPublic(w, req) || s.serveS3Bucket(w, r, req) || s.serveGatewayRoutes(w, r, req) ||
		s.serveMissing(w, r, req)
}

// serveVersionUpdate records the new version in the overlay, so the next
// descriptions report it, and answers with a successful update.
func (s *AWSStandIn) serveVersionUpdate(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	if !s.clusterExists(r, req.cluster) {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+req.cluster+".")
		return true
	}
	var in struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(req.body, &in)
	key := "cluster/" + req.cluster
	if req.op == "UpdateNodegroupVersion" {
		key = "nodegroup/" + req.cluster + "/" + req.nodegroup
	}
	s.mu.Lock()
	from, control := s.versionOf(key), s.versionOf("cluster/"+req.cluster)
	s.mu.Unlock()
	// A node group follows its control plane: never past it (EKS user
	// guide "Update a managed node group").
	refusal := versionStep(from, in.Version)
	if req.op == "UpdateNodegroupVersion" && in.Version != "" {
		refusal = ""
		if newerVersion(in.Version, control) {
			refusal = "Requested Kubernetes version " + in.Version + " is newer than the control plane's " + control
		}
	}
	if refusal != "" {
		writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", refusal)
		return true
	}
	s.patch(key, "version", in.Version)
	s.mu.Lock()
	u := s.newUpdate(req.op, "VersionUpdate", []map[string]string{{"type": "Version", "value": in.Version}})
	s.updating(key)
	s.mu.Unlock()
	writeJSON(w, map[string]any{"update": u})
	return true
}

// serveNodegroupTags serves tagging of node groups, which moto accepts only for clusters.
func (s *AWSStandIn) serveNodegroupTags(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	arn, _ := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/tags/"))
	// arn:aws:eks:REGION:ACCOUNT:nodegroup/CLUSTER/NODEGROUP/UUID
	_, rest, ok := strings.Cut(arn, ":nodegroup/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 {
		return false
	}
	key := "nodegroup/" + parts[0] + "/" + parts[1]
	s.mu.Lock()
	defer s.mu.Unlock()
	tags := map[string]string{}
	if t, ok := s.overlay[key]["tags"].(map[string]string); ok {
		tags = t
	} else if body := s.bodies[key]; body != nil {
		var obj struct {
			Tags map[string]string `json:"tags"`
		}
		_ = json.Unmarshal(body, &obj)
		for k, v := range obj.Tags {
			tags[k] = v
		}
	}
	tags = applyTagOp(r, req, tags)
	if s.overlay[key] == nil {
		s.overlay[key] = map[string]any{}
	}
	s.overlay[key]["tags"] = tags
	writeJSON(w, map[string]any{"tags": tags})
	return true
}

func (s *AWSStandIn) patch(key, field string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overlay[key] == nil {
		s.overlay[key] = map[string]any{}
	}
	s.overlay[key][field] = value
}

// applyOverlay patches an object description with what the stand-in changed.
// The caller holds s.mu.
func (s *AWSStandIn) applyOverlay(key string, obj map[string]any) {
	for k, v := range s.overlay[key] {
		obj[k] = v
	}
	s.pointAt(key, obj)
}

func (s *AWSStandIn) serveInjectedStatus(w http.ResponseWriter, req awsRequest) bool {
	key, field := objectKey(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	inj, body := s.statuses[key], s.bodies[key]
	// Only an object moto has deleted already is answered from its last
	// description; any other goes to moto and gets its state in remember.
	if inj == nil || inj.status != "DELETING" || body == nil {
		return false
	}
	status, issues, ok := s.nextInjected(key)
	if !ok {
		return false
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	s.applyOverlay(key, obj)
	obj["status"] = status
	if len(issues) > 0 {
		obj["health"] = map[string]any{"issues": issues}
	}
	writeJSON(w, map[string]any{field: obj})
	return true
}

// nextInjected takes the next injected state of an object, if any is left;
// the caller holds s.mu.
func (s *AWSStandIn) nextInjected(key string) (string, []HealthIssue, bool) {
	inj := s.statuses[key]
	if inj == nil || (inj.left == 0 && len(inj.lead) == 0) {
		return "", nil, false
	}
	status := inj.status
	if len(inj.lead) > 0 {
		status, inj.lead = inj.lead[0], inj.lead[1:]
	} else if inj.left > 0 {
		inj.left--
	}
	return status, inj.issues, true
}

// clusterExists asks moto, with the caller's own signature, whether the cluster is there.
func (s *AWSStandIn) clusterExists(r *http.Request, cluster string) bool {
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.moto.URL+"/clusters/"+url.PathEscape(cluster), nil)
	if err != nil {
		return false
	}
	out.Header.Set("Authorization", r.Header.Get("Authorization"))
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *AWSStandIn) serveAccessEntries(w http.ResponseWriter, r *http.Request, req awsRequest) {
	if !s.clusterExists(r, req.cluster) {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+req.cluster+".")
		return
	}
	var in struct {
		PrincipalARN string            `json:"principalArn"`
		Type         string            `json:"type"`
		Tags         map[string]string `json:"tags"`
		PolicyARN    string            `json:"policyArn"`
		AccessScope  map[string]any    `json:"accessScope"`
	}
	_ = json.Unmarshal(req.body, &in)
	now := float64(time.Now().Unix())
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := s.entries[req.cluster]
	if entries == nil {
		entries = map[string]*accessEntry{}
		s.entries[req.cluster] = entries
	}
	if req.op == "ListAccessEntries" {
		names := []string{}
		for p := range entries {
			names = append(names, p)
		}
		writeJSON(w, map[string]any{"accessEntries": names})
		return
	}
	principal := req.principal
	if req.op == "CreateAccessEntry" {
		principal = in.PrincipalARN
		if entries[principal] != nil {
			writeAWSError(w, "eks", http.StatusConflict, "ResourceInUseException", "The specified access entry resource is already in use on this cluster.")
			return
		}
		if in.Type == "" {
			in.Type = "STANDARD"
		}
		// A node entry (EC2_LINUX, EC2_WINDOWS) is the node's identity:
		// EKS names the user after the instance's private DNS name and
		// puts it in system:nodes (EKS user guide, "Create access entries":
		// "Amazon EKS ... assigns it to the system:nodes group"; API
		// reference, CreateAccessEntry `type`).
		username, groups := principal, []string{}
		if strings.HasPrefix(in.Type, "EC2_") {
			username, groups = "system:node:{{EC2PrivateDNSName}}", []string{"system:nodes"}
		}
		entries[principal] = &accessEntry{Entry: map[string]any{"clusterName": req.cluster, "principalArn": principal, "type": in.Type, "tags": in.Tags,
			"username": username, "kubernetesGroups": groups, "createdAt": now, "modifiedAt": now,
			"accessEntryArn": "arn:aws:eks:" + Region + ":123456789012:access-entry/" + req.cluster + "/" + principal}}
		writeJSON(w, map[string]any{"accessEntry": entries[principal].Entry})
		return
	}
	e := entries[principal]
	if e == nil {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "The specified access entry resource could not be found.")
		return
	}
	switch req.op {
	case "DescribeAccessEntry":
		writeJSON(w, map[string]any{"accessEntry": e.Entry})
	case "DeleteAccessEntry":
		delete(entries, principal)
		writeJSON(w, map[string]any{})
	case "AssociateAccessPolicy":
		if t, _ := e.Entry["type"].(string); strings.HasPrefix(t, "EC2_") {
			// EKS API reference, CreateAccessEntry `type`: an EC2_LINUX or
			// EC2_WINDOWS entry cannot have an access policy.
			writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", "Access policies cannot be associated with an access entry of type "+t+".")
			return
		}
		p := map[string]any{"policyArn": in.PolicyARN, "accessScope": in.AccessScope, "associatedAt": now, "modifiedAt": now}
		kept := []map[string]any{p}
		for _, old := range e.Policies {
			if old["policyArn"] != in.PolicyARN {
				kept = append(kept, old)
			}
		}
		e.Policies = kept
		writeJSON(w, map[string]any{"clusterName": req.cluster, "principalArn": principal, "associatedAccessPolicy": p})
	case "DisassociateAccessPolicy":
		policy, _ := url.PathUnescape(r.URL.EscapedPath()[strings.LastIndex(r.URL.EscapedPath(), "/")+1:])
		kept := []map[string]any{}
		for _, old := range e.Policies {
			if old["policyArn"] != policy {
				kept = append(kept, old)
			}
		}
		e.Policies = kept
		writeJSON(w, map[string]any{})
	case "ListAssociatedAccessPolicies":
		writeJSON(w, map[string]any{"clusterName": req.cluster, "principalArn": principal, "associatedAccessPolicies": e.Policies})
	}
}

// versionOf is the Kubernetes version an EKS cluster or node group reports
// (overlay first); the caller holds s.mu.
func (s *AWSStandIn) versionOf(key string) string {
	if v, ok := s.overlay[key]["version"].(string); ok {
		return v
	}
	var obj struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(s.bodies[key], &obj)
	return obj.Version
}

// updating makes the object answer UPDATING while its update runs, for as
// many polls as the update answers InProgress: EKS reports a cluster
// UPDATING for the ten minutes or more of a version upgrade (EKS user guide
// "Update existing cluster to new Kubernetes version"). The caller holds s.mu.
func (s *AWSStandIn) updating(key string) {
	if s.bodies[key] != nil {
		s.statuses[key] = &injectedStatus{status: "UPDATING", left: updatePolls}
	}
}

// applyTagOp applies an EKS TagResource or UntagResource request to tags (a
// nil map is taken as empty) and returns the result, as EKS keeps tags on
// clusters, node groups, add-ons and access entries alike.
func applyTagOp(r *http.Request, req awsRequest, tags map[string]string) map[string]string {
	if tags == nil {
		tags = map[string]string{}
	}
	switch req.op {
	case "TagResource":
		var in struct {
			Tags map[string]string `json:"tags"`
		}
		_ = json.Unmarshal(req.body, &in)
		for k, v := range in.Tags {
			tags[k] = v
		}
	case "UntagResource":
		for _, k := range r.URL.Query()["tagKeys"] {
			delete(tags, k)
		}
	}
	return tags
}
