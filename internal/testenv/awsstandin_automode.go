package testenv

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// The stand-in's EKS Auto Mode, which moto 5.2.1 ignores (CreateCluster and
// UpdateClusterConfig drop computeConfig, storageConfig and
// kubernetesNetworkConfig.elasticLoadBalancing; DescribeCluster reports none
// of them). Each behaviour and the page showing real EKS does it:
//   - CreateCluster and UpdateClusterConfig take the three capabilities,
//     DescribeCluster reports them (EKS API reference, CreateCluster,
//     UpdateClusterConfig and Cluster: computeConfig {enabled, nodePools,
//     nodeRoleArn}, storageConfig.blockStorage.enabled,
//     kubernetesNetworkConfig.elasticLoadBalancing.enabled);
//   - UpdateClusterConfig of them is an asynchronous update of type
//     AutoModeUpdate with ComputeConfig, StorageConfig and
//     KubernetesNetworkConfig params (API reference, Update and UpdateParam
//     types); the new configuration is reported once the update is done;
//   - the three are taken only all enabled or all disabled, in one request
//     (EKS user guide, "Enable EKS Auto Mode on an existing cluster": "The
//     compute, block storage, and load balancing capabilities must all be
//     enabled or disabled in the same request"), refused with EKS's
//     InvalidParameterException (its text as quoted in
//     kubernetes-sigs/cluster-api-provider-aws#5278);
//   - a nodeRoleArn without nodePools, and nodePools without a nodeRoleArn,
//     are refused (EKS's messages as quoted in
//     terraform-aws-modules/terraform-aws-eks#3238 and #3366, aws/aws-cdk#33894);
//   - a new cluster with Auto Mode must not bootstrap the self-managed
//     add-ons (EKS's message as quoted in hashicorp/terraform-provider-aws#40483;
//     the default of bootstrapSelfManagedAddons is true, API reference
//     CreateCluster);
//   - disabling Auto Mode on a cluster without it is refused (EKS's message
//     as quoted in aws-controllers-k8s/community#3046);
//   - turning Auto Mode off, and deleting the cluster, terminate the
//     instances Auto Mode launched (EKS user guide, "Disable EKS Auto Mode":
//     "EKS will terminate all EC2 instances operated by EKS Auto Mode";
//     "Delete a cluster", considerations for EKS Auto Mode). They are found
//     by the tags Auto Mode launches with (the conditions of the
//     AmazonEKSComputePolicy managed policy): eks:eks-cluster-name and
//     eks:kubernetes-node-pool-name.
//
// Not modelled: EKS does not document checking the cluster role (its Auto
// Mode policies, sts:TagSession in its trust policy) when Auto Mode is
// turned on, and the stand-in does not either; what the role lacks shows
// later, as nodes that do not launch.

const (
	autoModeClusterTag  = "eks:eks-cluster-name"
	autoModeNodePoolTag = "eks:kubernetes-node-pool-name"
)

// autoModeConfig is a cluster's Auto Mode as DescribeCluster reports it.
type autoModeConfig struct {
	enabled     bool
	nodePools   []string
	nodeRoleARN string
}

// autoModeCluster is one cluster's Auto Mode: what DescribeCluster reports
// and the configuration of an update still running.
type autoModeCluster struct {
	region, name string
	now          autoModeConfig
	next         *autoModeConfig
	updateID     string
}

// standInAutoMode holds the clusters that had Auto Mode configured, by cluster key.
type standInAutoMode map[string]*autoModeCluster

// autoModeRequest is the Auto Mode part of a CreateCluster or
// UpdateClusterConfig body.
type autoModeRequest struct {
	Compute *struct {
		Enabled     *bool    `json:"enabled"`
		NodePools   []string `json:"nodePools"`
		NodeRoleARN string   `json:"nodeRoleArn"`
	} `json:"computeConfig"`
	Storage *struct {
		BlockStorage *struct {
			Enabled *bool `json:"enabled"`
		} `json:"blockStorage"`
	} `json:"storageConfig"`
	Network *struct {
		ELB *struct {
			Enabled *bool `json:"enabled"`
		} `json:"elasticLoadBalancing"`
	} `json:"kubernetesNetworkConfig"`
	Bootstrap *bool `json:"bootstrapSelfManagedAddons"`
}

// capabilities are the three settings, each nil when the request leaves it out.
func (in autoModeRequest) capabilities() (compute, storage, elb *bool) {
	if in.Compute != nil {
		compute = in.Compute.Enabled
	}
	if in.Storage != nil && in.Storage.BlockStorage != nil {
		storage = in.Storage.BlockStorage.Enabled
	}
	if in.Network != nil && in.Network.ELB != nil {
		elb = in.Network.ELB.Enabled
	}
	return compute, storage, elb
}

// EKS's refusals, as the pages cited above quote them.
const (
	autoModeAllOrNone   = "For EKS Auto Mode, please ensure that all required configs, including computeConfig, kubernetesNetworkConfig, and blockStorage are all either fully enabled or fully disabled."
	autoModeRoleNoPools = "When Compute Config nodeRoleArn is not null or empty, nodePool value(s) must be provided."
	autoModePoolsNoRole = "When Compute Config nodeRoleArn is null or empty, nodePool list cannot be populated."
	autoModeBootstrap   = "When EKS Auto Mode is enabled, bootstrapSelfManagedAddons must be set to false."
	autoModeNotEnabled  = "Cannot modify EKS Auto Mode configuration. Auto Mode is not enabled on this cluster."
)

// AutoModeEnabled reports whether the cluster's computeConfig.enabled is
// true, once the update that turned it on has completed: what the test
// ground's Auto Mode controller follows.
func (s *AWSStandIn) AutoModeEnabled(cluster string) bool {
	s.settleAutoMode()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.autoMode[clusterKey(Region, cluster)]
	return a != nil && a.now.enabled
}

// checkAutoMode is EKS's refusal of the request's Auto Mode part ("" when
// it takes it). have is the cluster's Auto Mode (nil: never configured);
// create says the request makes the cluster.
func checkAutoMode(in autoModeRequest, create bool, have *autoModeCluster) (code, msg string) {
	compute, storage, elb := in.capabilities()
	if compute == nil && storage == nil && elb == nil {
		return "", ""
	}
	value := func(b *bool) bool { return b != nil && *b }
	// A new cluster leaves out what is off; an update names all three.
	if value(compute) != value(storage) || value(storage) != value(elb) || (!create && (compute == nil || storage == nil || elb == nil)) {
		return "InvalidParameterException", autoModeAllOrNone
	}
	on := value(compute)
	switch {
	case on && in.Compute.NodeRoleARN != "" && len(in.Compute.NodePools) == 0:
		return "InvalidParameterException", autoModeRoleNoPools
	case on && in.Compute.NodeRoleARN == "" && len(in.Compute.NodePools) > 0:
		return "InvalidParameterException", autoModePoolsNoRole
	case create && on && (in.Bootstrap == nil || *in.Bootstrap):
		return "InvalidParameterException", autoModeBootstrap
	case !create && !on && (have == nil || !have.now.enabled):
		return "InvalidRequestException", autoModeNotEnabled
	}
	return "", ""
}

// serveAutoMode refuses what EKS refuses of CreateCluster's Auto Mode part
// (the rest goes to moto) and serves UpdateClusterConfig of Auto Mode;
// false leaves the request to the rest of the stand-in.
func (s *AWSStandIn) serveAutoMode(w http.ResponseWriter, r *http.Request, req awsRequest) bool {
	if req.op != "CreateCluster" && req.op != "UpdateClusterConfig" {
		return false
	}
	var in autoModeRequest
	if json.Unmarshal(req.body, &in) != nil {
		return false
	}
	if compute, storage, elb := in.capabilities(); compute == nil && storage == nil && elb == nil {
		return false
	}
	create := req.op == "CreateCluster"
	if !create && !s.clusterExists(r, req.cluster) {
		writeAWSError(w, "eks", http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+req.cluster+".")
		return true
	}
	s.mu.Lock()
	have := s.autoMode[clusterKey(regionOf(r), req.cluster)]
	s.mu.Unlock()
	if code, msg := checkAutoMode(in, create, have); code != "" {
		writeAWSError(w, "eks", http.StatusBadRequest, code, msg)
		return true
	}
	if create {
		return false
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(req.body, &keys)
	for k := range keys {
		if k != "computeConfig" && k != "storageConfig" && k != "kubernetesNetworkConfig" && k != "clientRequestToken" {
			writeAWSError(w, "eks", http.StatusBadRequest, "InvalidParameterException", "stand-in: an Auto Mode update together with "+k+" is not modelled")
			return true
		}
	}
	next := requestedAutoMode(in)
	params := []map[string]string{
		{"type": "ComputeConfig", "value": jsonString(in.Compute)},
		{"type": "StorageConfig", "value": jsonString(in.Storage)},
		{"type": "KubernetesNetworkConfig", "value": jsonString(in.Network)},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.newUpdate(req.op, "AutoModeUpdate", params)
	s.updating("cluster/" + req.cluster)
	a := s.autoModeOf(regionOf(r), req.cluster)
	a.next, a.updateID = &next, u["id"].(string)
	writeJSON(w, map[string]any{"update": u})
	return true
}

func requestedAutoMode(in autoModeRequest) autoModeConfig {
	compute, _, _ := in.capabilities()
	c := autoModeConfig{enabled: compute != nil && *compute}
	if in.Compute != nil {
		c.nodePools, c.nodeRoleARN = in.Compute.NodePools, in.Compute.NodeRoleARN
	}
	return c
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// autoModeOf is the cluster's Auto Mode record, made on first use; the
// caller holds s.mu.
func (s *AWSStandIn) autoModeOf(region, cluster string) *autoModeCluster {
	if s.autoMode == nil {
		s.autoMode = standInAutoMode{}
	}
	key := clusterKey(region, cluster)
	if s.autoMode[key] == nil {
		s.autoMode[key] = &autoModeCluster{region: region, name: cluster}
	}
	return s.autoMode[key]
}

// recordAutoMode keeps the Auto Mode of a cluster moto has just created
// (the request passed checkAutoMode).
func (s *AWSStandIn) recordAutoMode(r *http.Request, cluster string, body []byte) {
	var in autoModeRequest
	if json.Unmarshal(body, &in) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A new cluster under an old name starts from its own request.
	delete(s.autoMode, clusterKey(regionOf(r), cluster))
	if compute, storage, elb := in.capabilities(); compute == nil && storage == nil && elb == nil {
		return
	}
	s.autoModeOf(regionOf(r), cluster).now = requestedAutoMode(in)
}

// settleAutoMode completes the Auto Mode updates that are done (their
// InProgress answers, or the cluster's UPDATING ones, used up): a
// Successful one takes effect, and one that turned Auto Mode off
// terminates its instances.
func (s *AWSStandIn) settleAutoMode() {
	var off []*autoModeCluster
	s.mu.Lock()
	for _, a := range s.autoMode {
		if a.next == nil {
			continue
		}
		u := s.ext().updates[a.updateID]
		inj := s.statuses["cluster/"+a.name]
		updating := inj != nil && inj.status == "UPDATING" && inj.left != 0
		if u != nil && u.left > 0 && updating {
			continue
		}
		if u == nil || u.status == "Successful" {
			if a.now.enabled && !a.next.enabled {
				off = append(off, a)
			}
			a.now = *a.next
		}
		a.next, a.updateID = nil, ""
	}
	s.mu.Unlock()
	for _, a := range off {
		s.terminateAutoModeNodes(a.region, a.name)
	}
}

// deleteAutoMode: the cluster is deleted, and with it what Auto Mode ran.
func (s *AWSStandIn) deleteAutoMode(region, cluster string) {
	key := clusterKey(region, cluster)
	s.mu.Lock()
	a := s.autoMode[key]
	delete(s.autoMode, key)
	s.mu.Unlock()
	if a != nil {
		s.terminateAutoModeNodes(region, cluster)
	}
}

// terminateAutoModeNodes terminates the cluster's instances that carry
// Auto Mode's tags.
func (s *AWSStandIn) terminateAutoModeNodes(region, cluster string) {
	form := url.Values{"Action": {"DescribeInstances"},
		"Filter.1.Name": {"tag:" + autoModeClusterTag}, "Filter.1.Value.1": {cluster},
		"Filter.2.Name": {"tag-key"}, "Filter.2.Value.1": {autoModeNodePoolTag},
		"Filter.3.Name": {"instance-state-name"}, "Filter.3.Value.1": {"pending"}, "Filter.3.Value.2": {"running"}, "Filter.3.Value.3": {"stopping"},
		"Filter.3.Value.4": {"stopped"}}
	var out struct {
		IDs []string `xml:"reservationSet>item>instancesSet>item>instanceId"`
	}
	if s.ec2CallIn(region, form, &out) != nil || len(out.IDs) == 0 {
		return
	}
	term := url.Values{"Action": {"TerminateInstances"}}
	for i, id := range out.IDs {
		term.Set("InstanceId."+strconv.Itoa(i+1), id)
	}
	_ = s.ec2CallIn(region, term, nil)
}

// withAutoMode adds the cluster's Auto Mode to a CreateCluster or
// DescribeCluster answer, as EKS reports it.
func (s *AWSStandIn) withAutoMode(region, cluster string, body []byte) []byte {
	s.settleAutoMode()
	s.mu.Lock()
	a := s.autoMode[clusterKey(region, cluster)]
	var now autoModeConfig
	if a != nil {
		now = a.now
	}
	s.mu.Unlock()
	if a == nil {
		return body
	}
	var doc map[string]map[string]any
	if json.Unmarshal(body, &doc) != nil || doc["cluster"] == nil {
		return body
	}
	compute := map[string]any{"enabled": now.enabled, "nodePools": append([]string{}, now.nodePools...)}
	if now.nodeRoleARN != "" {
		compute["nodeRoleArn"] = now.nodeRoleARN
	}
	cl := doc["cluster"]
	cl["computeConfig"] = compute
	cl["storageConfig"] = map[string]any{"blockStorage": map[string]any{"enabled": now.enabled}}
	network, _ := cl["kubernetesNetworkConfig"].(map[string]any)
	if network == nil {
		network = map[string]any{}
	}
	network["elasticLoadBalancing"] = map[string]any{"enabled": now.enabled}
	cl["kubernetesNetworkConfig"] = network
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}
