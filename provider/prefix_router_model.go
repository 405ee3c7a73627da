package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// prefixRouterModel is llmd_prefix_router's state.
type prefixRouterModel struct {
	ID                   types.String   `tfsdk:"id"`
	Cluster              types.Object   `tfsdk:"cluster"`
	Kubernetes           types.Object   `tfsdk:"kubernetes"`
	Fleet                types.Object   `tfsdk:"fleet"`
	Name                 types.String   `tfsdk:"name"`
	Namespace            types.String   `tfsdk:"namespace"`
	Image                types.String   `tfsdk:"image"`
	APIKey               types.String   `tfsdk:"api_key"`
	APIKeyVersion        types.String   `tfsdk:"api_key_version"`
	APIKeys              types.List     `tfsdk:"api_keys"`
	Replicas             types.Int64    `tfsdk:"replicas"`
	BlockSize            types.Int64    `tfsdk:"block_size"`
	ServedModel          types.String   `tfsdk:"served_model"`
	Gateway              types.Object   `tfsdk:"gateway"`
	InferencePool        types.String   `tfsdk:"inference_pool"`
	Scoring              types.Object   `tfsdk:"scoring"`
	Limits               types.Object   `tfsdk:"limits"`
	Service              types.Object   `tfsdk:"service"`
	Resources            types.Object   `tfsdk:"resources"`
	Scheduling           types.Object   `tfsdk:"scheduling"`
	LogLevel             types.String   `tfsdk:"log_level"`
	Metrics              types.Object   `tfsdk:"metrics"`
	ForceConflicts       types.Bool     `tfsdk:"force_conflicts"`
	WaitForRollout       types.Bool     `tfsdk:"wait_for_rollout"`
	URL                  types.String   `tfsdk:"url"`
	LoadBalancerHostname types.String   `tfsdk:"load_balancer_hostname"`
	ConfigHash           types.String   `tfsdk:"config_hash"`
	RenderedHash         types.String   `tfsdk:"rendered_hash"`
	Inventory            types.List     `tfsdk:"inventory"`
	Timeouts             timeouts.Value `tfsdk:"timeouts"`
}

// routerFleet is `fleet` (llmd_model_fleet.router_target) in plain Go.
type routerFleet struct {
	Namespace           string `json:"namespace"`
	Selector            string `json:"selector"`
	HTTPPort            int64  `json:"http_port"`
	KVEventsPort        int64  `json:"kv_events_port"`
	ReplayPort          int64  `json:"replay_port"`
	Topic               string `json:"topic"`
	BlockSize           int64  `json:"block_size"`
	ServedModel         string `json:"served_model"`
	ClaimName           string `json:"claim_name,omitempty"`
	ModelPath           string `json:"model_path,omitempty"`
	TokenizerPath       string `json:"tokenizer_path,omitempty"`
	TokenizerConfigPath string `json:"tokenizer_config_path,omitempty"`
	MaxNumSeqs          *int64 `json:"max_num_seqs,omitempty"`
	SchedulingPolicy    string `json:"scheduling_policy,omitempty"`
	Deployment          string `json:"deployment,omitempty"`
	Autoscaled          *bool  `json:"autoscaled,omitempty"`
	ScaleToZeroAfter    string `json:"scale_to_zero_after,omitempty"`
	S3Region            string `json:"s3_region,omitempty"`
	S3ReaderRole        string `json:"s3_reader_role,omitempty"`
}

type routerScorer struct {
	Type   string             `json:"type"`
	Weight float64            `json:"weight"`
	Params map[string]float64 `json:"params,omitempty"`
}

// routerSettings are the router's inputs in plain Go; the Deployment
// carries them in its settings annotation so an import recovers them.
type routerSettings struct {
	Name        string      `json:"name"`
	Namespace   string      `json:"namespace"`
	Fleet       routerFleet `json:"fleet"`
	Image       string      `json:"image"`
	Replicas    int64       `json:"replicas"`
	BlockSize   *int64      `json:"block_size,omitempty"`
	ServedModel *string     `json:"served_model,omitempty"`
	Scoring     struct {
		Preset  *string        `json:"preset,omitempty"`
		Scorers []routerScorer `json:"scorers,omitempty"`
	} `json:"scoring"`
	Limits struct {
		// MaxInFlightPerPod nil takes the fleet's max_num_seqs.
		MaxInFlightPerPod *int64 `json:"max_in_flight_per_pod"`
		MaxPendingPerPod  int64  `json:"max_pending_per_pod"`
		// MaxPendingPrefill 0 (a settings annotation written before it):
		// the prefill bound off, as that router ran.
		MaxPendingPrefill int64 `json:"max_pending_prefill_per_pod"`
		// PrefillReserve 0 (a settings annotation written before it):
		// no pods held open, as that router ran.
		PrefillReserve  float64       `json:"prefill_reserve"`
		MaxQueue        int64         `json:"max_queue"`
		KVOutputReserve int64         `json:"kv_output_reserve"`
		KVHeadroom      float64       `json:"kv_headroom"`
		QueueTimeout    string        `json:"queue_timeout"`
		DrainTimeout    string        `json:"drain_timeout"`
		Classes         []routerClass `json:"priority_classes,omitempty"`
		DefaultClass    *string       `json:"default_class,omitempty"`
		TenantShare     *float64      `json:"tenant_share,omitempty"`
	} `json:"limits"`
	APIKeys []routerAPIKey `json:"api_keys,omitempty"`
	Service struct {
		Type         string            `json:"type"`
		Internal     bool              `json:"internal"`
		Port         int64             `json:"port"`
		Annotations  map[string]string `json:"annotations"`
		SourceRanges []string          `json:"load_balancer_source_ranges"`
	} `json:"service"`
	Resources *struct {
		CPU         *string `json:"cpu,omitempty"`
		Memory      *string `json:"memory,omitempty"`
		MemoryLimit *string `json:"memory_limit,omitempty"`
	} `json:"resources,omitempty"`
	Scheduling *struct {
		NodeSelector map[string]string `json:"node_selector,omitempty"`
		Tolerations  []string          `json:"tolerations,omitempty"`
	} `json:"scheduling,omitempty"`
	// APIKeyVersion says a key is set (the key itself is write-only, in a Secret).
	APIKeyVersion *string `json:"api_key_version,omitempty"`
	LogLevel      string  `json:"log_level"`
	Metrics       *struct {
		ServiceMonitor *bool `json:"service_monitor,omitempty"`
	} `json:"metrics,omitempty"`
	ForceConflicts bool `json:"force_conflicts"`
	WaitForRollout bool `json:"wait_for_rollout"`
	// Gateway is gateway mode; nil (proxy mode) leaves the annotation as
	// releases before gateway mode wrote it.
	Gateway *routerGateway `json:"gateway,omitempty"`
}

// routerClass is one of `limits.priority_classes` in plain Go.
type routerClass struct {
	Name string  `json:"name"`
	TTL  *string `json:"ttl,omitempty"`
}

// routerAPIKey is one of `api_keys` in plain Go: a digest, not a key.
type routerAPIKey struct {
	SHA256 string  `json:"sha256"`
	Tenant *string `json:"tenant,omitempty"`
	Class  *string `json:"class,omitempty"`
}

// routerGateway is `gateway` in plain Go.
type routerGateway struct {
	FailureMode string            `json:"failure_mode"`
	Port        int64             `json:"port"`
	TargetPort  *int64            `json:"target_port,omitempty"`
	Selector    map[string]string `json:"selector,omitempty"`
}

// routerSettingsAnnotation holds the router's settings on its Deployment.
const routerSettingsAnnotation = "llmd.dev/router-settings"

// known reports whether every input is known.
func (m prefixRouterModel) known() bool {
	for _, v := range []attr.Value{m.Fleet, m.Name, m.Namespace, m.Image, m.APIKeyVersion, m.APIKeys, m.Replicas, m.BlockSize, m.ServedModel, m.Scoring, m.Limits,
		m.Service, m.Resources, m.Scheduling, m.LogLevel, m.Metrics, m.ForceConflicts, m.WaitForRollout, m.Gateway} {
		if !fullyKnown(v) {
			return false
		}
	}
	return true
}

func (m prefixRouterModel) settings() (routerSettings, diag.Diagnostics) {
	var s routerSettings
	var diags diag.Diagnostics
	s.Name, s.Namespace, s.Image, s.Replicas = m.Name.ValueString(), m.Namespace.ValueString(), m.Image.ValueString(), m.Replicas.ValueInt64()
	s.LogLevel, s.ForceConflicts, s.WaitForRollout = m.LogLevel.ValueString(), m.ForceConflicts.ValueBool(), m.WaitForRollout.ValueBool()
	s.BlockSize, s.ServedModel = m.BlockSize.ValueInt64Pointer(), m.ServedModel.ValueStringPointer()
	s.APIKeyVersion = m.APIKeyVersion.ValueStringPointer()
	for _, part := range []struct {
		v    types.Object
		into any
	}{{m.Fleet, &s.Fleet}, {m.Scoring, &s.Scoring}, {m.Limits, &s.Limits}, {m.Service, &s.Service}} {
		diags.Append(decodeObject(part.v, part.into)...)
	}
	if !m.APIKeys.IsNull() {
		diags.Append(decodeObject(m.APIKeys, &s.APIKeys)...)
	}
	if !m.Resources.IsNull() {
		diags.Append(decodeObject(m.Resources, &s.Resources)...)
	}
	if !m.Scheduling.IsNull() {
		diags.Append(decodeObject(m.Scheduling, &s.Scheduling)...)
	}
	if !m.Metrics.IsNull() {
		diags.Append(decodeObject(m.Metrics, &s.Metrics)...)
	}
	if !m.Gateway.IsNull() {
		diags.Append(decodeObject(m.Gateway, &s.Gateway)...)
	}
	return s, diags
}

// contradictions are settings that disagree with the fleet, each naming
// both attributes. A fleet value assembled by hand (vLLM deployed some
// other way) is checked for the mistakes router_target cannot make.
func (s routerSettings) contradictions() diag.Diagnostics {
	var diags diag.Diagnostics
	f := s.Fleet
	if s.BlockSize != nil && *s.BlockSize != f.BlockSize {
		diags.AddAttributeError(path.Root("block_size"), "Router contradicts the fleet",
			fmt.Sprintf("block_size = %d, but fleet.block_size = %d: vLLM hashes blocks of %d tokens, so the router would never find a cached prefix. "+
				"Remove block_size, or change the fleet's vllm.block_size.", *s.BlockSize, f.BlockSize, f.BlockSize))
	}
	if s.ServedModel != nil && *s.ServedModel != f.ServedModel {
		diags.AddAttributeError(path.Root("served_model"), "Router contradicts the fleet",
			fmt.Sprintf("served_model = %q, but fleet.served_model = %q: requests for the router's model would be refused by every pod. "+
				"Remove served_model, or change the fleet's model.served_name.", *s.ServedModel, f.ServedModel))
	}
	for _, p := range []struct {
		name string
		v    int64
	}{{"kv_events_port", f.KVEventsPort}, {"replay_port", f.ReplayPort}} {
		if p.v == f.HTTPPort {
			diags.AddAttributeError(path.Root("fleet").AtName(p.name), "Router contradicts the fleet",
				fmt.Sprintf("fleet.%s = %d is fleet.http_port too: vLLM cannot serve HTTP and publish KV events on one port.", p.name, p.v))
		}
	}
	if f.ReplayPort != 0 && f.ReplayPort == f.KVEventsPort {
		diags.AddAttributeError(path.Root("fleet").AtName("replay_port"), "Router contradicts the fleet",
			fmt.Sprintf("fleet.replay_port = fleet.kv_events_port = %d: the publisher and the replay socket need two ports.", f.ReplayPort))
	}
	if !strings.Contains(f.Topic, "{ip}") && !strings.Contains(f.Topic, "{port}") {
		diags.AddAttributeError(path.Root("fleet").AtName("topic"), "Router contradicts the fleet",
			fmt.Sprintf("fleet.topic %q names no pod ({ip} or {port}): every pod would publish under one topic and the router could not tell whose cache a block is in.", f.Topic))
	}
	if s.Scoring.Preset != nil && len(s.Scoring.Scorers) > 0 {
		diags.AddAttributeError(path.Root("scoring"), "Conflicting scoring", "give either scoring.preset or scoring.scorers, not both")
	}
	if s.Scoring.Preset == nil && len(s.Scoring.Scorers) == 0 {
		diags.AddAttributeError(path.Root("scoring"), "No scoring", "give scoring.preset (\"cost-aware\" or \"llmd\") or scoring.scorers")
	}
	diags.Append(s.gatewayContradictions()...)
	return diags
}

// scoringPresets are the named scorer mixes scoring.preset takes (the
// schema validates the name): the router's default, and llm-d's for
// comparison.
var scoringPresets = map[string][]config.Scorer{"cost-aware": config.CostAwareScorers(), "llmd": config.LLMDScorers()}

// router turns the settings into the workloads spec.
func (s routerSettings) router(ctx context.Context, conn connection) (workloads.Router, error) {
	var err error
	r := workloads.Router{Name: s.Name, Namespace: s.Namespace, Image: s.Image, Replicas: int32(s.Replicas), LogLevel: s.LogLevel,
		Target: workloads.RouterTarget{Namespace: s.Fleet.Namespace, Selector: s.Fleet.Selector, HTTPPort: int(s.Fleet.HTTPPort),
			KVEventsPort: int(s.Fleet.KVEventsPort), ReplayPort: int(s.Fleet.ReplayPort), Topic: s.Fleet.Topic, BlockSize: int(s.Fleet.BlockSize),
			ServedModel: s.Fleet.ServedModel, ClaimName: s.Fleet.ClaimName, ModelPath: s.Fleet.ModelPath,
			TokenizerPath: s.Fleet.TokenizerPath, TokenizerConfigPath: s.Fleet.TokenizerConfigPath,
			Deployment: s.Fleet.Deployment, Autoscaled: s.Fleet.Autoscaled != nil && *s.Fleet.Autoscaled,
			S3Region: s.Fleet.S3Region, S3ReaderRole: s.Fleet.S3ReaderRole, SchedulingPolicy: s.Fleet.SchedulingPolicy},
		Limits: workloads.RouterLimits{MaxInFlightPerPod: int(s.maxInFlightPerPod()),
			MaxPendingPerPod: int(s.Limits.MaxPendingPerPod), MaxPendingPrefillPerPod: int(s.Limits.MaxPendingPrefill),
			PrefillReserve: s.Limits.PrefillReserve, MaxQueue: int(s.Limits.MaxQueue),
			KVOutputReserve: int(s.Limits.KVOutputReserve), KVHeadroom: s.Limits.KVHeadroom},
		Service: workloads.Exposure{Type: s.Service.Type, Port: int(s.Service.Port), Internal: s.Service.Internal,
			SourceRanges: s.Service.SourceRanges, Annotations: s.Service.Annotations},
		Resources: workloads.RouterResources{CPU: "1", Memory: "1Gi", MemoryLimit: "2Gi"},
	}
	if r.Limits.QueueTimeout, err = time.ParseDuration(s.Limits.QueueTimeout); err != nil {
		return r, fmt.Errorf("limits.queue_timeout: %w", err)
	}
	if r.Limits.Drain, err = time.ParseDuration(s.Limits.DrainTimeout); err != nil {
		return r, fmt.Errorf("limits.drain_timeout: %w", err)
	}
	if z := s.Fleet.ScaleToZeroAfter; z != "" {
		if r.Target.ScaleToZeroAfter, err = time.ParseDuration(z); err != nil {
			return r, fmt.Errorf("fleet.scale_to_zero_after: %w", err)
		}
		if r.Target.Deployment == "" || !r.Target.Autoscaled {
			return r, fmt.Errorf("fleet.scale_to_zero_after needs fleet.deployment and fleet.autoscaled: pass llmd_model_fleet.router_target as is")
		}
	}
	if err := s.flow(&r); err != nil {
		return r, err
	}
	if s.Scoring.Preset != nil {
		r.Scorers = scoringPresets[*s.Scoring.Preset]
	}
	for _, sc := range s.Scoring.Scorers {
		r.Scorers = append(r.Scorers, config.Scorer{Type: sc.Type, Weight: sc.Weight, Params: sc.Params})
	}
	if s.APIKeyVersion != nil {
		r.APIKeyVersion = *s.APIKeyVersion
	}
	if g := s.Gateway; g != nil {
		labels, err := matchLabels(s.Fleet.Selector)
		if err != nil {
			return r, err
		}
		r.Gateway = &workloads.RouterGateway{Pool: s.Name, Port: int(g.Port), FailureMode: g.FailureMode, MatchLabels: labels}
	}
	if res := s.Resources; res != nil {
		for _, o := range []struct {
			from *string
			to   *string
		}{{res.CPU, &r.Resources.CPU}, {res.Memory, &r.Resources.Memory}, {res.MemoryLimit, &r.Resources.MemoryLimit}} {
			if o.from != nil {
				*o.to = *o.from
			}
		}
	}
	// The cluster's system node group, off the GPU nodes, as its
	// `kubernetes` object reports it; scheduling replaces either half.
	if r.NodeSelector, r.Tolerations, err = conn.systemScheduling(ctx); err != nil {
		return r, err
	}
	if sc := s.Scheduling; sc != nil {
		if sc.NodeSelector != nil {
			r.NodeSelector = sc.NodeSelector
		}
		if sc.Tolerations != nil {
			r.Tolerations = nil
			for _, t := range sc.Tolerations {
				tol, err := parseTaint(t)
				if err != nil {
					return r, fmt.Errorf("scheduling.tolerations: %w", err)
				}
				r.Tolerations = append(r.Tolerations, tol)
			}
		}
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	mirrors, err := conn.imageMirrors(ctx)
	if err != nil {
		return r, err
	}
	return r.Mirrored(mirrors)
}

// wantServiceMonitor is metrics.service_monitor: nil asks the cluster.
func (s routerSettings) wantServiceMonitor() *bool {
	if s.Metrics == nil {
		return nil
	}
	return s.Metrics.ServiceMonitor
}

func (s routerSettings) annotation() string {
	b, _ := json.Marshal(s) // plain strings, numbers and maps: cannot fail
	return string(b)
}

// restore sets the model's inputs from a Deployment's settings annotation (import).
func (m *prefixRouterModel) restore(ctx context.Context, raw string) diag.Diagnostics {
	var s routerSettings
	var diags diag.Diagnostics
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		diags.AddError("Importing prefix router", fmt.Sprintf("the Deployment's %s annotation is not readable: %v", routerSettingsAnnotation, err))
		return diags
	}
	if s.Limits.KVHeadroom == 0 {
		// Written before the KV bound: that router ran without it
		// (kv_output_reserve 0) and with serve's default headroom.
		s.Limits.KVHeadroom = defaultKVHeadroom
	}
	m.Name, m.Namespace, m.Image, m.Replicas = types.StringValue(s.Name), types.StringValue(s.Namespace), types.StringValue(s.Image), types.Int64Value(s.Replicas)
	m.LogLevel, m.ForceConflicts, m.WaitForRollout = types.StringValue(s.LogLevel), types.BoolValue(s.ForceConflicts), types.BoolValue(s.WaitForRollout)
	m.BlockSize, m.ServedModel = types.Int64PointerValue(s.BlockSize), types.StringPointerValue(s.ServedModel)
	m.APIKeyVersion = types.StringPointerValue(s.APIKeyVersion)
	m.InferencePool = s.inferencePoolName()
	var d diag.Diagnostics
	m.APIKeys, d = encodeObjects(s.APIKeys, routerAPIKeyTypes)
	diags.Append(d...)
	for _, part := range []struct {
		from  any
		types map[string]attr.Type
		into  *types.Object
		set   bool
	}{{s.Fleet, routerTargetTypes, &m.Fleet, true}, {s.Scoring, routerScoringTypes, &m.Scoring, true}, {s.Limits, routerLimitsTypes, &m.Limits, true},
		{s.Service, routerServiceTypes, &m.Service, true}, {s.Resources, routerResourcesTypes, &m.Resources, s.Resources != nil},
		{s.Scheduling, routerSchedulingTypes, &m.Scheduling, s.Scheduling != nil}, {s.Metrics, routerMetricsTypes, &m.Metrics, s.Metrics != nil},
		{s.Gateway, routerGatewayTypes, &m.Gateway, s.Gateway != nil}} {
		if !part.set {
			*part.into = types.ObjectNull(part.types)
			continue
		}
		v, d := encodeObject(ctx, part.from, part.types)
		diags.Append(d...)
		*part.into = v
	}
	return diags
}

// pinnedRouterImage is the image a release of the provider pins: the
// router image built from the same commit, by digest as the release build
// stamps it (internal/buildinfo), else tagged with the provider's version.
// A development build ("dev", "test", a commit) pins none.
func pinnedRouterImage(version string) string {
	if buildinfo.Pinned() {
		return buildinfo.RouterImage
	}
	v := strings.TrimPrefix(version, "v")
	if v == "" || v[0] < '0' || v[0] > '9' {
		return ""
	}
	return buildinfo.ImageRepository + ":" + v
}

func (m *prefixRouterModel) fields() anchoredFields {
	return anchoredFields{id: &m.ID, name: &m.Name, namespace: &m.Namespace, renderedHash: &m.RenderedHash,
		cluster: &m.Cluster, kubernetes: &m.Kubernetes, inventory: &m.Inventory, timeouts: &m.Timeouts}
}

func (m *prefixRouterModel) imported() bool { return m.Fleet.IsNull() }

// sharedNodeWarning says when the router's replicas must share one node:
// more than one replica placed on the cluster's system node group while
// that group's desired size is 1 (the default system_node_group). The
// replicas then still cover a crashed pod and a rollout, but not the node:
// its loss or replacement stops routing until a new node is up. The default
// stays one node because a second doubles the system group's cost for
// every cluster; the warning names the fix. A node selector of one's own
// (scheduling.node_selector) places the pods elsewhere: no warning.
func sharedNodeWarning(conn connection, s routerSettings) (path.Path, string) {
	if conn.cluster == nil || s.Replicas < 2 || (s.Scheduling != nil && s.Scheduling.NodeSelector != nil) {
		return path.Empty(), ""
	}
	size := conn.cluster.SystemNodeDesiredSize
	if size.IsNull() || size.IsUnknown() || size.ValueInt64() != 1 {
		return path.Empty(), ""
	}
	return path.Root("replicas"), fmt.Sprintf("replicas = %d, but the cluster's system node group has desired_size = 1: every router pod runs on that one node, "+
		"so losing or replacing it stops routing until a new node is up. Set system_node_group.desired_size (and min_size) to 2 or more on "+
		"llmd_inference_cluster (the pods spread over nodes and zones), or replicas = 1 to say one node is enough.", s.Replicas)
}
