package testenv

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// standInAddon is one EKS managed add-on as the stand-in holds it.
type standInAddon struct {
	doc  map[string]any
	left int
	// next is the status after the transient one (CREATING, UPDATING, DELETING).
	next string
	// degraded is how many describes answer DEGRADED before next ACTIVE.
	degraded int
}

// addonsOnNodes are the add-ons whose pods are Deployments that schedule on
// nodes: while nodes are young they report DEGRADED with
// InsufficientNumberOfReplicas before ACTIVE (EKS API reference AddonIssue
// codes; terraform-provider-aws eks/addon.go waitAddonCreated waits through
// DEGRADED; hashicorp/terraform-provider-aws#20404 shows coredns doing so).
var addonsOnNodes = map[string]bool{"coredns": true, "aws-fsx-csi-driver": true}

// StandInAddonVersions is the stand-in's add-on catalog: the versions it
// offers per add-on, newest first; the first is the default for every
// Kubernetes version, except kube-proxy, whose version follows Kubernetes'
// (one build per minor, as EKS publishes it). The version strings are the
// stand-in's own, shaped like EKS's.
var StandInAddonVersions = map[string][]string{
	"vpc-cni":                {"v1.19.5-eksbuild.1", "v1.19.2-eksbuild.1", "v1.18.6-eksbuild.1"},
	"coredns":                {"v1.11.4-eksbuild.2", "v1.11.3-eksbuild.1"},
	"eks-pod-identity-agent": {"v1.3.7-eksbuild.2", "v1.3.4-eksbuild.1"},
	"aws-fsx-csi-driver":     {"v1.5.0-eksbuild.1", "v1.4.0-eksbuild.1"},
}

// addonVersionsFor is the catalog entry of an add-on on one Kubernetes version.
func addonVersionsFor(name, k8s string) []string {
	if name == "kube-proxy" {
		return []string{"v" + k8s + ".0-eksbuild.1"}
	}
	return StandInAddonVersions[name]
}

// AddonStatus makes an installed add-on of a cluster in Region report
// status (e.g. DEGRADED, after someone edited its objects) until its next
// UpdateAddon.
func (s *AWSStandIn) AddonStatus(cluster, name, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.ext().addons[clusterKey(Region, cluster)][name]; a != nil {
		a.doc["status"], a.left = status, 0
	}
}

// Addon is the stand-in's description of an installed add-on of a cluster
// in Region (nil when absent).
func (s *AWSStandIn) Addon(cluster, name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.ext().addons[clusterKey(Region, cluster)][name]; a != nil {
		return a.doc
	}
	return nil
}

func (s *AWSStandIn) serveAddons(w http.ResponseWriter, r *http.Request, req awsRequest) {
	if req.op == "DescribeAddonVersions" {
		s.serveAddonVersions(w, r.URL.Query())
		return
	}
	if !s.clusterExists(r, req.cluster) {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+req.cluster+".")
		return
	}
	var in struct {
		AddonName        string            `json:"addonName"`
		AddonVersion     string            `json:"addonVersion"`
		ResolveConflicts string            `json:"resolveConflicts"`
		Tags             map[string]string `json:"tags"`
	}
	_ = json.Unmarshal(req.body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ext()
	key := clusterKey(regionOf(r), req.cluster)
	if e.addons[key] == nil {
		e.addons[key] = map[string]*standInAddon{}
	}
	addons := e.addons[key]
	name := req.nodegroup
	if req.op == "CreateAddon" {
		name = in.AddonName
	}
	notFound := func() {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No addon: "+name+" found in cluster: "+req.cluster)
	}
	a := addons[name]
	switch req.op {
	case "ListAddons":
		names := []string{}
		for n := range addons {
			names = append(names, n)
		}
		writeJSON(w, map[string]any{"addons": names})
	case "CreateAddon":
		if a != nil {
			writeAWSError(w, "eks", http.StatusConflict, "ResourceInUseException", "Addon already exists.")
			return
		}
		if !knownAddonVersion(name, in.AddonVersion) {
			writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", "stand-in: addon "+name+" has no version "+in.AddonVersion)
			return
		}
		now := float64(time.Now().Unix())
		tags := in.Tags
		if tags == nil {
			tags = map[string]string{}
		}
		degraded := 0
		if addonsOnNodes[name] {
			degraded = degradedPolls
		}
		addons[name] = &standInAddon{left: e.addonPolls, next: "ACTIVE", degraded: degraded, doc: map[string]any{"addonName": name, "clusterName": req.cluster, "status": "CREATING",
			"addonVersion": in.AddonVersion, "health": map[string]any{"issues": []any{}}, "createdAt": now, "modifiedAt": now, "tags": tags,
			"addonArn": "arn:aws:eks:" + regionOf(r) + ":123456789012:addon/" + req.cluster + "/" + name + "/stand-in"}}
		s.mark("CreateAddon " + req.cluster + "/" + name)
		writeJSON(w, map[string]any{"addon": addons[name].doc})
	case "DescribeAddon":
		if a == nil {
			notFound()
			return
		}
		if a.left > 0 {
			a.left--
		} else if a.next == "ACTIVE" && a.degraded > 0 {
			a.degraded--
			a.doc["status"] = "DEGRADED"
			a.doc["health"] = map[string]any{"issues": []map[string]any{{"code": "InsufficientNumberOfReplicas",
				"message": "The add-on is unhealthy because it doesn't have the desired number of replicas.", "resourceIds": []string{}}}}
		} else if a.next != "" {
			a.doc["health"] = map[string]any{"issues": []any{}}
			if a.next == "GONE" {
				delete(addons, name)
				notFound()
				return
			}
			a.doc["status"], a.next = a.next, ""
		}
		writeJSON(w, map[string]any{"addon": a.doc})
	case "UpdateAddon":
		if a == nil {
			notFound()
			return
		}
		if in.AddonVersion != "" {
			if !knownAddonVersion(name, in.AddonVersion) {
				writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", "stand-in: addon "+name+" has no version "+in.AddonVersion)
				return
			}
			a.doc["addonVersion"] = in.AddonVersion
		}
		a.doc["status"], a.next, a.left = "UPDATING", "ACTIVE", e.addonPolls
		writeJSON(w, map[string]any{"update": s.newUpdate("UpdateAddon", "AddonUpdate", []map[string]string{{"type": "AddonVersion", "value": in.AddonVersion}})})
	case "DeleteAddon":
		if a == nil {
			notFound()
			return
		}
		a.doc["status"], a.next, a.left = "DELETING", "GONE", e.addonPolls
		writeJSON(w, map[string]any{"addon": a.doc})
	}
}

func knownAddonVersion(name, version string) bool {
	if name == "kube-proxy" {
		return strings.HasPrefix(version, "v1.") && strings.HasSuffix(version, ".0-eksbuild.1")
	}
	for _, v := range StandInAddonVersions[name] {
		if v == version {
			return true
		}
	}
	return false
}

func (s *AWSStandIn) serveAddonVersions(w http.ResponseWriter, q url.Values) {
	name, k8s := q.Get("addonName"), q.Get("kubernetesVersion")
	s.mu.Lock()
	clusterVersions := append([]string(nil), s.versions...)
	s.mu.Unlock()
	if k8s != "" {
		clusterVersions = []string{k8s}
	}
	var infos []map[string]any
	for _, v := range addonVersionsFor(name, k8s) {
		var compat []map[string]any
		for _, cv := range clusterVersions {
			compat = append(compat, map[string]any{"clusterVersion": cv, "defaultVersion": v == addonVersionsFor(name, cv)[0], "platformVersions": []string{"*"}})
		}
		infos = append(infos, map[string]any{"addonVersion": v, "architecture": []string{"amd64", "arm64"}, "compatibilities": compat})
	}
	if len(infos) == 0 {
		writeJSON(w, map[string]any{"addons": []any{}})
		return
	}
	writeJSON(w, map[string]any{"addons": []map[string]any{{"addonName": name, "type": "networking", "owner": "aws", "publisher": "eks", "addonVersions": infos}}})
}

// serveAddonTags tags add-ons, which moto does not know.
func (s *AWSStandIn) serveAddonTags(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	arn, _ := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/tags/"))
	_, rest, ok := strings.Cut(arn, ":addon/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.ext().addons[clusterKey(regionOf(r), parts[0])][parts[1]]
	if a == nil {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "stand-in: no add-on "+rest)
		return true
	}
	tags, _ := a.doc["tags"].(map[string]string)
	tags = applyTagOp(r, req, tags)
	writeJSON(w, map[string]any{"tags": tags})
	return true
}
