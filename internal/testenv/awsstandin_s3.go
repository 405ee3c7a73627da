// The stand-in's part for the model bucket: S3 as AWS answers where moto
// is kinder (another account's bucket is private, another region's is
// redirected), lacks an API (tags in CreateBucket) or applies bucket
// policies without their conditions, and the VPC's S3 gateway endpoint
// as EC2 treats it (one endpoint per service and route table; pending
// after the create, deleting after the delete). Each behaviour cites its
// source.

package testenv

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// endpointPolls: the describes an S3 gateway endpoint answers pending after
// its create, and deleting after its delete.
const endpointPolls = 2

// s3Subresources name the bucket-level S3 APIs by their query key.
var s3Subresources = map[string]string{"tagging": "BucketTagging", "publicAccessBlock": "PublicAccessBlock",
	"ownershipControls": "BucketOwnershipControls", "encryption": "BucketEncryption", "policy": "BucketPolicy",
	"location": "BucketLocation", "versioning": "BucketVersioning", "acl": "BucketAcl", "cors": "BucketCors",
	"lifecycle": "BucketLifecycleConfiguration"}

// s3Operation names a path-style S3 call (the SDK addresses an endpoint
// given by IP address so), for the call record and the behaviours below.
func s3Operation(r *http.Request, req *awsRequest) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	req.bucket = bucket
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	verb := map[string]string{http.MethodGet: "Get", http.MethodPut: "Put", http.MethodDelete: "Delete"}[r.Method]
	switch {
	case q.Get("x-id") != "":
		req.op = q.Get("x-id")
	case bucket == "":
		req.op = "ListBuckets"
	case key != "":
		req.op = map[string]string{http.MethodGet: "GetObject", http.MethodPut: "PutObject", http.MethodHead: "HeadObject", http.MethodDelete: "DeleteObject"}[r.Method]
	case has("versions"):
		req.op = "ListObjectVersions"
	case has("delete") && r.Method == http.MethodPost:
		req.op = "DeleteObjects"
	default:
		for k, name := range s3Subresources {
			if has(k) && verb != "" {
				req.op = verb + name
			}
		}
	}
	if req.op == "" {
		req.op = map[string]string{http.MethodHead: "HeadBucket", http.MethodPut: "CreateBucket", http.MethodDelete: "DeleteBucket", http.MethodGet: "ListObjects"}[r.Method]
		if q.Get("list-type") == "2" {
			req.op = "ListObjectsV2"
		}
	}
}

// serveS3Bucket answers calls on a bucket as S3 does where moto is
// kinder, and keeps bucket policies from moto's condition-blind checks:
//   - another account's bucket is private: AccessDenied 403 (S3 user guide
//     "Identity and Access Management for Amazon S3": by default only the
//     resource owner has access); moto serves it to any account;
//   - a bucket of another region: a 301 PermanentRedirect naming its
//     region in x-amz-bucket-region, with no body for HEAD (S3 API
//     reference HeadBucket, 301 Moved Permanently; Error responses,
//     PermanentRedirect); moto serves it whatever region the request is
//     signed for;
//   - bucket policies (servePolicy).
func (s *AWSStandIn) serveS3Bucket(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	if req.service != "s3" || req.bucket == "" || req.op == "CreateBucket" {
		return false
	}
	region, ok := s.s3BucketRegion(r, req.bucket)
	if !ok {
		return false
	}
	if !slices.Contains(s.s3OwnBuckets(r), req.bucket) {
		s3Error(w, r, http.StatusForbidden, "AccessDenied", "Access Denied", req.bucket)
		return true
	}
	if region != regionOf(r) && req.op != "GetBucketLocation" {
		w.Header().Set("x-amz-bucket-region", region)
		s3Error(w, r, http.StatusMovedPermanently, "PermanentRedirect", "The bucket you are attempting to access must be addressed using the specified endpoint. "+
			"Please send all future requests to this endpoint.", req.bucket)
		return true
	}
	return s.servePolicy(w, r, req)
}

// s3Error answers in S3's error format; a HEAD answer has no body.
func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg, bucket string) {
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><BucketName>%s</BucketName><RequestId>stand-in</RequestId></Error>`,
		code, msg, bucket)
}

// s3Call sends an S3 request to moto with the caller's signature (moto
// knows the account by the key).
func (s *AWSStandIn) s3Call(r *http.Request, method, path string, body string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, method, s.moto.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	out.Header.Set("Authorization", r.Header.Get("Authorization"))
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" {
		out.Header.Set("X-Amz-Security-Token", tok)
	}
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// s3BucketRegion is the region moto holds a bucket in; false when it has none.
func (s *AWSStandIn) s3BucketRegion(r *http.Request, bucket string) (string, bool) {
	resp, _, err := s.s3Call(r, http.MethodHead, "/"+url.PathEscape(bucket), "")
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	return resp.Header.Get("x-amz-bucket-region"), true
}

// s3OwnBuckets are the buckets of the caller's account.
func (s *AWSStandIn) s3OwnBuckets(r *http.Request) []string {
	var out struct {
		Names []string `xml:"Buckets>Bucket>Name"`
	}
	resp, body, err := s.s3Call(r, http.MethodGet, "/", "")
	if err != nil || resp.StatusCode != http.StatusOK || xml.Unmarshal(body, &out) != nil {
		return nil
	}
	return out.Names
}

// servePolicy keeps a bucket's policy as written and answers
// GetBucketPolicy with it, but hands moto only the statements without a
// Condition: moto applies a statement whatever its condition
// (moto/s3/models.py FakeBucket.get_permission evaluates action and
// resource alone), so a deny of requests without TLS (aws:SecureTransport
// false) would refuse every object request. The stand-in stands for S3's
// HTTPS endpoints, which every SDK uses by default; its plain HTTP on
// loopback is the test ground's transport, so such a condition is false
// for every request it receives.
func (s *AWSStandIn) servePolicy(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	s.mu.Lock()
	if s.more.policies == nil {
		s.more.policies = map[string]string{}
	}
	kept, ok := s.more.policies[req.bucket]
	s.mu.Unlock()
	switch req.op {
	case "GetBucketPolicy":
		if !ok {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(kept))
		return true
	case "DeleteBucketPolicy":
		s.mu.Lock()
		delete(s.more.policies, req.bucket)
		s.mu.Unlock()
		return false
	case "PutBucketPolicy":
	default:
		return false
	}
	var doc map[string]any
	if err := json.Unmarshal(req.body, &doc); err != nil {
		s3Error(w, r, http.StatusBadRequest, "MalformedPolicy", "Policies must be valid JSON", req.bucket)
		return true
	}
	statements, _ := doc["Statement"].([]any)
	var plain []any
	for _, st := range statements {
		if m, ok := st.(map[string]any); ok && m["Condition"] == nil {
			plain = append(plain, st)
		}
	}
	path := "/" + url.PathEscape(req.bucket) + "?policy"
	if len(plain) > 0 {
		doc["Statement"] = plain
		b, _ := json.Marshal(doc)
		if resp, body, err := s.s3Call(r, http.MethodPut, path, string(b)); err != nil || resp.StatusCode >= 300 {
			s3Error(w, r, http.StatusBadGateway, "StandInError", fmt.Sprintf("moto refused the policy: %v %s", err, body), req.bucket)
			return true
		}
	} else if resp, _, err := s.s3Call(r, http.MethodDelete, path, ""); err != nil || resp.StatusCode >= 300 {
		s3Error(w, r, http.StatusBadGateway, "StandInError", fmt.Sprintf("moto kept the old policy: %v", err), req.bucket)
		return true
	}
	s.mu.Lock()
	s.more.policies[req.bucket] = string(req.body)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return true
}

// tagNewBucket applies the tags of CreateBucketConfiguration, which moto
// ignores: S3 creates a general purpose bucket with them in the one call
// (S3 API reference CreateBucket, CreateBucketConfiguration Tags, which
// needs s3:TagResource).
func (s *AWSStandIn) tagNewBucket(r *http.Request, req awsRequest) {
	// A new bucket under an old name starts without the old one's policy.
	s.mu.Lock()
	delete(s.more.policies, req.bucket)
	s.mu.Unlock()
	var conf struct {
		Tags []struct {
			Key   string `xml:"Key"`
			Value string `xml:"Value"`
		} `xml:"Tags>Tag"`
	}
	if len(req.body) == 0 || xml.Unmarshal(req.body, &conf) != nil || len(conf.Tags) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString(`<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>`)
	for _, t := range conf.Tags {
		b.WriteString("<Tag><Key>")
		_ = xml.EscapeText(&b, []byte(t.Key))
		b.WriteString("</Key><Value>")
		_ = xml.EscapeText(&b, []byte(t.Value))
		b.WriteString("</Value></Tag>")
	}
	b.WriteString("</TagSet></Tagging>")
	_, _, _ = s.s3Call(r, http.MethodPut, "/"+url.PathEscape(req.bucket)+"?tagging", b.String())
}

// serveGatewayRoutes refuses a gateway endpoint on a route table that an
// endpoint of the same service serves already: a route table holds one
// route per prefix list, and EC2 answers RouteAlreadyExists "route table
// rtb-… already has a route with destination-prefix-list-id pl-…"
// (eksctl-io/eksctl#2510 and #4377, creating the S3 endpoint in a VPC
// that had one). moto adds a second endpoint to the table.
func (s *AWSStandIn) serveGatewayRoutes(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	if req.op != "CreateVpcEndpoint" && req.op != "ModifyVpcEndpoint" {
		return false
	}
	form, _ := url.ParseQuery(string(req.body))
	param, self, service := "RouteTableId.", "", form.Get("ServiceName")
	if req.op == "ModifyVpcEndpoint" {
		param, self = "AddRouteTableId.", form.Get("VpcEndpointId")
	}
	var tables []string
	for k, v := range form {
		if strings.HasPrefix(k, param) {
			tables = append(tables, v...)
		}
	}
	if len(tables) == 0 || (req.op == "CreateVpcEndpoint" && !strings.EqualFold(form.Get("VpcEndpointType"), "Gateway")) {
		return false
	}
	var out struct {
		Items []struct {
			ID      string   `xml:"vpcEndpointId"`
			Service string   `xml:"serviceName"`
			State   string   `xml:"state"`
			Tables  []string `xml:"routeTableIdSet>item"`
		} `xml:"vpcEndpointSet>item"`
	}
	if s.ec2Call(r, url.Values{"Action": {"DescribeVpcEndpoints"}}, &out) != nil {
		return false
	}
	for _, ep := range out.Items {
		if ep.ID == self {
			service = ep.Service
		}
	}
	for _, ep := range out.Items {
		if ep.ID == self || ep.Service != service || strings.EqualFold(ep.State, "deleted") {
			continue
		}
		for _, rt := range tables {
			if slices.Contains(ep.Tables, rt) {
				writeAWSError(w, "ec2", http.StatusBadRequest, "RouteAlreadyExists",
					fmt.Sprintf("route table %s already has a route with destination-prefix-list-id %s", rt, s.prefixListOf(r, service)))
				return true
			}
		}
	}
	return false
}

// prefixListOf is the id of a service's managed prefix list in moto.
func (s *AWSStandIn) prefixListOf(r *http.Request, service string) string {
	var out struct {
		IDs []string `xml:"prefixListSet>item>prefixListId"`
	}
	if s.ec2Call(r, url.Values{"Action": {"DescribeManagedPrefixLists"}, "Filter.1.Name": {"prefix-list-name"}, "Filter.1.Value.1": {service}}, &out) != nil ||
		len(out.IDs) == 0 {
		return "pl-unknown"
	}
	return out.IDs[0]
}

// patchEndpoints reports VPC endpoints in the states EC2 passes through,
// which moto skips: pending after CreateVpcEndpoint and deleting after
// DeleteVpcEndpoints, for endpointPolls describes each, before available
// and deleted (EC2 API reference VpcEndpoint State; terraform-provider-aws
// vpc_endpoint.go waits for available after the create and for deleted
// after the delete).
func (s *AWSStandIn) patchEndpoints(req awsRequest, body []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.more.endpoints == nil {
		s.more.endpoints = map[string]*endpointPhase{}
	}
	phases := s.more.endpoints
	switch req.op {
	case "CreateVpcEndpoint":
		var out struct {
			ID string `xml:"vpcEndpoint>vpcEndpointId"`
		}
		if xml.Unmarshal(body, &out) == nil && out.ID != "" {
			phases[out.ID] = &endpointPhase{state: "pending", left: endpointPolls}
			return replaceEndpointState(body, out.ID, "pending")
		}
	case "DeleteVpcEndpoints":
		form, _ := url.ParseQuery(string(req.body))
		for k, v := range form {
			if strings.HasPrefix(k, "VpcEndpointId.") {
				for _, id := range v {
					phases[id] = &endpointPhase{state: "deleting", left: endpointPolls}
				}
			}
		}
	case "DescribeVpcEndpoints":
		for id, p := range phases {
			if !strings.Contains(string(body), "<vpcEndpointId>"+id+"</vpcEndpointId>") {
				continue
			}
			body = replaceEndpointState(body, id, p.state)
			if p.left--; p.left <= 0 {
				delete(phases, id)
			}
		}
	}
	return body
}

// endpointPhase is a state the stand-in reports for a VPC endpoint for left more describes.
type endpointPhase struct {
	state string
	left  int
}

// replaceEndpointState sets the state of one endpoint in an EC2 answer:
// the first <state> after its id, which moto writes before the endpoint's
// nested sets.
func replaceEndpointState(body []byte, id, state string) []byte {
	doc := string(body)
	at := strings.Index(doc, "<vpcEndpointId>"+id+"</vpcEndpointId>")
	if at < 0 {
		return body
	}
	rest := doc[at:]
	open := strings.Index(rest, "<state>")
	end := strings.Index(rest, "</state>")
	if open < 0 || end < open {
		return body
	}
	return []byte(doc[:at] + rest[:open] + "<state>" + state + rest[end:])
}

// CheckPrivateBucket checks the settings a bucket the cluster creates must
// have, as S3 reports them: Block Public Access all on, ACLs off
// (BucketOwnerEnforced), SSE-S3 by default, and a policy denying requests
// without TLS.
func CheckPrivateBucket(ctx context.Context, c *s3.Client, name string) error {
	pab, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String(name)})
	if err != nil {
		return fmt.Errorf("public access block of %s: %w", name, err)
	}
	if p := pab.PublicAccessBlockConfiguration; !aws.ToBool(p.BlockPublicAcls) || !aws.ToBool(p.IgnorePublicAcls) || !aws.ToBool(p.BlockPublicPolicy) ||
		!aws.ToBool(p.RestrictPublicBuckets) {
		return fmt.Errorf("public access block of %s is %+v, want all four on", name, *p)
	}
	own, err := c.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: aws.String(name)})
	if err != nil || len(own.OwnershipControls.Rules) != 1 || own.OwnershipControls.Rules[0].ObjectOwnership != s3types.ObjectOwnershipBucketOwnerEnforced {
		return fmt.Errorf("ownership controls of %s: %+v (%v), want BucketOwnerEnforced", name, own, err)
	}
	enc, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String(name)})
	if err != nil || len(enc.ServerSideEncryptionConfiguration.Rules) != 1 ||
		enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != s3types.ServerSideEncryptionAes256 {
		return fmt.Errorf("default encryption of %s: %+v (%v), want SSE-S3 (AES256)", name, enc, err)
	}
	pol, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(name)})
	if err != nil {
		return fmt.Errorf("policy of %s: %w", name, err)
	}
	var doc struct {
		Statement []struct {
			Effect    string
			Principal any
			Action    any
			Resource  []string
			Condition map[string]map[string]string
		}
	}
	if err := json.Unmarshal([]byte(aws.ToString(pol.Policy)), &doc); err != nil || len(doc.Statement) != 1 {
		return fmt.Errorf("policy of %s: %s (%v), want one statement", name, aws.ToString(pol.Policy), err)
	}
	st := doc.Statement[0]
	arn := "arn:aws:s3:::" + name
	if st.Effect != "Deny" || fmt.Sprint(st.Principal) != "*" || fmt.Sprint(st.Action) != "s3:*" || !slices.Equal(st.Resource, []string{arn, arn + "/*"}) ||
		st.Condition["Bool"]["aws:SecureTransport"] != "false" {
		return fmt.Errorf("policy of %s: %s, want a deny of s3:* on the bucket and its objects without TLS", name, aws.ToString(pol.Policy))
	}
	return nil
}
