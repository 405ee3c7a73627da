package testenv

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The stand-in's EKS Pod Identity associations, which moto 5.2.1 lacks
// (CreatePodIdentityAssociation answers 404 there). Each behaviour follows
// the EKS API reference pages of the operation (docs.aws.amazon.com/eks/
// latest/APIReference/API_<Operation>.html):
//   - paths: POST and GET /clusters/{name}/pod-identity-associations (create,
//     list), GET, POST and DELETE .../{associationId} (describe, update, delete);
//   - namespace, serviceAccount and roleArn are required on create
//     (InvalidParameterException otherwise); a second association for one
//     service account is refused with ResourceInUseException;
//   - a missing cluster or association answers ResourceNotFoundException;
//   - ListPodIdentityAssociations filters by namespace and serviceAccount and
//     returns summaries without the role (PodIdentityAssociationSummary),
//     paged by maxResults and nextToken;
//   - associations are addressed only through their cluster, so they go
//     with it when the cluster is deleted.

// podIdentityAssociation is one association as the API describes it.
type podIdentityAssociation struct {
	ClusterName    string            `json:"clusterName"`
	Namespace      string            `json:"namespace"`
	ServiceAccount string            `json:"serviceAccount"`
	RoleARN        string            `json:"roleArn"`
	AssociationARN string            `json:"associationArn"`
	AssociationID  string            `json:"associationId"`
	Tags           map[string]string `json:"tags,omitempty"`
	CreatedAt      float64           `json:"createdAt"`
	ModifiedAt     float64           `json:"modifiedAt"`
}

// podIdentities are the associations by cluster key, then by id.
type podIdentities map[string]map[string]*podIdentityAssociation

// eksPodIdentityOperation names the Pod Identity operations from an EKS path.
func eksPodIdentityOperation(m string, seg []string, req *awsRequest) bool {
	if len(seg) < 3 || seg[0] != "clusters" || seg[2] != "pod-identity-associations" {
		return false
	}
	switch len(seg) {
	case 3:
		req.op = map[string]string{"POST": "CreatePodIdentityAssociation", "GET": "ListPodIdentityAssociations"}[m]
	case 4:
		req.principal = seg[3] // the association id
		req.op = map[string]string{"GET": "DescribePodIdentityAssociation", "POST": "UpdatePodIdentityAssociation", "DELETE": "DeletePodIdentityAssociation"}[m]
	default:
		return false
	}
	return req.op != ""
}

// PodIdentityAssociations are the cluster's associations, "namespace/serviceAccount" to role ARN.
func (s *AWSStandIn) PodIdentityAssociations(cluster string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, a := range s.podIDs[clusterKey(Region, cluster)] {
		out[a.Namespace+"/"+a.ServiceAccount] = a.RoleARN
	}
	return out
}

// servePodIdentity answers the Pod Identity operations; false means the
// request is not one of them. A DeleteCluster passing by drops the
// cluster's associations and goes on to moto.
func (s *AWSStandIn) servePodIdentity(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	key := clusterKey(regionOf(r), req.cluster)
	if req.op == "DeleteCluster" {
		s.mu.Lock()
		delete(s.podIDs, key)
		s.mu.Unlock()
		return false
	}
	if !strings.HasSuffix(req.op, "PodIdentityAssociation") && req.op != "ListPodIdentityAssociations" {
		return false
	}
	if !s.clusterExists(r, req.cluster) {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+req.cluster+".")
		return true
	}
	var in struct {
		Namespace      string            `json:"namespace"`
		ServiceAccount string            `json:"serviceAccount"`
		RoleARN        string            `json:"roleArn"`
		Tags           map[string]string `json:"tags"`
	}
	_ = json.Unmarshal(req.body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.podIDs == nil {
		s.podIDs = podIdentities{}
	}
	if s.podIDs[key] == nil {
		s.podIDs[key] = map[string]*podIdentityAssociation{}
	}
	assocs := s.podIDs[key]
	now := float64(time.Now().Unix())
	switch req.op {
	case "CreatePodIdentityAssociation":
		for field, v := range map[string]string{"namespace": in.Namespace, "serviceAccount": in.ServiceAccount, "roleArn": in.RoleARN} {
			if v == "" {
				writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", field+" is required")
				return true
			}
		}
		for _, a := range assocs {
			if a.Namespace == in.Namespace && a.ServiceAccount == in.ServiceAccount {
				writeAWSError(w, "eks", http.StatusConflict, "ResourceInUseException", "Association already exists: "+a.AssociationID)
				return true
			}
		}
		id := "a-" + randomLower(17)
		a := &podIdentityAssociation{ClusterName: req.cluster, Namespace: in.Namespace, ServiceAccount: in.ServiceAccount, RoleARN: in.RoleARN,
			AssociationID: id, AssociationARN: "arn:aws:eks:" + regionOf(r) + ":123456789012:podidentityassociation/" + req.cluster + "/" + id,
			Tags: in.Tags, CreatedAt: now, ModifiedAt: now}
		assocs[id] = a
		writeJSON(w, map[string]any{"association": a})
	case "ListPodIdentityAssociations":
		q := r.URL.Query()
		var summaries []map[string]string
		for _, a := range assocs {
			if (q.Get("namespace") == "" || q.Get("namespace") == a.Namespace) && (q.Get("serviceAccount") == "" || q.Get("serviceAccount") == a.ServiceAccount) {
				summaries = append(summaries, map[string]string{"clusterName": a.ClusterName, "namespace": a.Namespace, "serviceAccount": a.ServiceAccount,
					"associationArn": a.AssociationARN, "associationId": a.AssociationID})
			}
		}
		sort.Slice(summaries, func(i, j int) bool { return summaries[i]["associationId"] < summaries[j]["associationId"] })
		from, _ := strconv.Atoi(q.Get("nextToken"))
		from = min(from, len(summaries))
		to := len(summaries)
		if n, err := strconv.Atoi(q.Get("maxResults")); err == nil && n > 0 && from+n < to {
			to = from + n
		}
		out := map[string]any{"associations": append([]map[string]string{}, summaries[from:to]...)}
		if to < len(summaries) {
			out["nextToken"] = strconv.Itoa(to)
		}
		writeJSON(w, out)
	default:
		a := assocs[req.principal]
		if a == nil {
			writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No Pod Identity Association found for id: "+req.principal)
			return true
		}
		switch req.op {
		case "UpdatePodIdentityAssociation":
			if in.RoleARN != "" {
				a.RoleARN, a.ModifiedAt = in.RoleARN, now
			}
		case "DeletePodIdentityAssociation":
			delete(assocs, req.principal)
		}
		writeJSON(w, map[string]any{"association": a})
	}
	return true
}

// randomLower is n random lowercase letters and digits, like EKS's ids.
func randomLower(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
