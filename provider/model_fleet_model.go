package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// modelFleetModel is llmd_model_fleet's state.
type modelFleetModel struct {
	ID               types.String   `tfsdk:"id"`
	Cluster          types.Object   `tfsdk:"cluster"`
	Kubernetes       types.Object   `tfsdk:"kubernetes"`
	Name             types.String   `tfsdk:"name"`
	Namespace        types.String   `tfsdk:"namespace"`
	Model            types.Object   `tfsdk:"model"`
	HFToken          types.String   `tfsdk:"hf_token"`
	Storage          types.Object   `tfsdk:"storage"`
	Replicas         types.Int64    `tfsdk:"replicas"`
	Autoscaling      types.Object   `tfsdk:"autoscaling"`
	VLLM             types.Object   `tfsdk:"vllm"`
	KVEvents         types.Object   `tfsdk:"kv_events"`
	Resources        types.Object   `tfsdk:"resources"`
	Scheduling       types.Object   `tfsdk:"scheduling"`
	Rollout          types.Object   `tfsdk:"rollout"`
	BaselineService  types.Object   `tfsdk:"baseline_service"`
	ForceConflicts   types.Bool     `tfsdk:"force_conflicts"`
	WaitForRollout   types.Bool     `tfsdk:"wait_for_rollout"`
	RouterTarget     types.Object   `tfsdk:"router_target"`
	BaselineEndpoint types.String   `tfsdk:"baseline_endpoint"`
	ReadyReplicas    types.Int64    `tfsdk:"ready_replicas"`
	RenderedHash     types.String   `tfsdk:"rendered_hash"`
	Inventory        types.List     `tfsdk:"inventory"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

// fleetSettings are the fleet's inputs in plain Go: what the objects are
// built from, and what the Deployment carries in its settings annotation so
// an import recovers them exactly.
type fleetSettings struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Model     struct {
		ServedName   string  `json:"served_name"`
		Path         string  `json:"path"`
		Source       *string `json:"source,omitempty"`
		StagingImage *string `json:"staging_image,omitempty"`
	} `json:"model"`
	Storage struct {
		FileSystemID string `json:"file_system_id,omitempty"`
		DNSName      string `json:"dns_name,omitempty"`
		MountName    string `json:"mount_name,omitempty"`
		ClaimName    string `json:"claim_name,omitempty"`
		Bucket       string `json:"bucket,omitempty"`
		Region       string `json:"region,omitempty"`
	} `json:"storage"`
	Replicas    int64 `json:"replicas"`
	Autoscaling *struct {
		MinReplicas      int64  `json:"min_replicas"`
		MaxReplicas      int64  `json:"max_replicas"`
		TargetPerPod     *int64 `json:"target_per_pod"`
		TargetWorkPerPod *int64 `json:"target_work_per_pod"`
		ScaleDownDelay   string `json:"scale_down_delay"`
		ScaleToZeroAfter string `json:"scale_to_zero_after"`
	} `json:"autoscaling,omitempty"`
	VLLM struct {
		Image                string            `json:"image"`
		BlockSize            int64             `json:"block_size"`
		GPUMemoryUtilization *float64          `json:"gpu_memory_utilization,omitempty"`
		MaxModelLen          int64             `json:"max_model_len"`
		MaxNumSeqs           int64             `json:"max_num_seqs"`
		TensorParallelSize   int64             `json:"tensor_parallel_size"`
		SchedulingPolicy     string            `json:"scheduling_policy"`
		ExtraArgs            []string          `json:"extra_args"`
		Env                  map[string]string `json:"env"`
	} `json:"vllm"`
	KVEvents struct {
		Port       int64  `json:"port"`
		ReplayPort int64  `json:"replay_port"`
		Topic      string `json:"topic"`
	} `json:"kv_events"`
	Resources *struct {
		CPU         *string `json:"cpu,omitempty"`
		Memory      *string `json:"memory,omitempty"`
		MemoryLimit *string `json:"memory_limit,omitempty"`
		ShmSize     *string `json:"shm_size,omitempty"`
	} `json:"resources,omitempty"`
	Scheduling *struct {
		NodeSelector map[string]string `json:"node_selector,omitempty"`
		Tolerations  []string          `json:"tolerations,omitempty"`
		OnePerNode   *bool             `json:"one_per_node,omitempty"`
	} `json:"scheduling,omitempty"`
	Rollout struct {
		MaxUnavailable int64  `json:"max_unavailable"`
		MaxSurge       int64  `json:"max_surge"`
		StartupTimeout string `json:"startup_timeout"`
		DrainTimeout   string `json:"drain_timeout"`
	} `json:"rollout"`
	Baseline struct {
		Enabled     bool              `json:"enabled"`
		Name        *string           `json:"name,omitempty"`
		Type        string            `json:"type"`
		Port        int64             `json:"port"`
		Annotations map[string]string `json:"annotations"`
		// Internal is a pointer so that settings written before it existed
		// read as the default (true), not as internet-facing.
		Internal     *bool    `json:"internal,omitempty"`
		SourceRanges []string `json:"load_balancer_source_ranges"`
	} `json:"baseline_service"`
	ForceConflicts bool `json:"force_conflicts"`
	WaitForRollout bool `json:"wait_for_rollout"`
}

// SettingsAnnotation holds the fleet's settings on its Deployment.
const settingsAnnotation = "llmd.dev/fleet-settings"

// known reports whether every input is known (a plan that waits on the
// cluster or the file system is not).
func (m modelFleetModel) known() bool {
	for _, v := range []attr.Value{m.Name, m.Namespace, m.Model, m.Storage, m.Replicas, m.Autoscaling, m.VLLM, m.KVEvents, m.Resources,
		m.Scheduling, m.Rollout, m.BaselineService, m.ForceConflicts, m.WaitForRollout} {
		if !fullyKnown(v) {
			return false
		}
	}
	return true
}

// settings decodes the inputs. The framework's object conversion does the
// work through a JSON round trip of the Terraform values.
func (m modelFleetModel) settings(ctx context.Context) (fleetSettings, diag.Diagnostics) {
	var s fleetSettings
	var diags diag.Diagnostics
	s.Name, s.Namespace, s.Replicas = m.Name.ValueString(), m.Namespace.ValueString(), m.Replicas.ValueInt64()
	s.ForceConflicts, s.WaitForRollout = m.ForceConflicts.ValueBool(), m.WaitForRollout.ValueBool()
	for _, part := range []struct {
		v    types.Object
		into any
	}{{m.Model, &s.Model}, {m.Storage, &s.Storage}, {m.VLLM, &s.VLLM}, {m.KVEvents, &s.KVEvents}, {m.Rollout, &s.Rollout}, {m.BaselineService, &s.Baseline}} {
		diags.Append(decodeObject(part.v, part.into)...)
	}
	if !m.Resources.IsNull() {
		s.Resources = &struct {
			CPU         *string `json:"cpu,omitempty"`
			Memory      *string `json:"memory,omitempty"`
			MemoryLimit *string `json:"memory_limit,omitempty"`
			ShmSize     *string `json:"shm_size,omitempty"`
		}{}
		diags.Append(decodeObject(m.Resources, s.Resources)...)
	}
	if !m.Autoscaling.IsNull() {
		s.Autoscaling = &struct {
			MinReplicas      int64  `json:"min_replicas"`
			MaxReplicas      int64  `json:"max_replicas"`
			TargetPerPod     *int64 `json:"target_per_pod"`
			TargetWorkPerPod *int64 `json:"target_work_per_pod"`
			ScaleDownDelay   string `json:"scale_down_delay"`
			ScaleToZeroAfter string `json:"scale_to_zero_after"`
		}{}
		diags.Append(decodeObject(m.Autoscaling, s.Autoscaling)...)
	}
	if !m.Scheduling.IsNull() {
		s.Scheduling = &struct {
			NodeSelector map[string]string `json:"node_selector,omitempty"`
			Tolerations  []string          `json:"tolerations,omitempty"`
			OnePerNode   *bool             `json:"one_per_node,omitempty"`
		}{}
		diags.Append(decodeObject(m.Scheduling, s.Scheduling)...)
	}
	return s, diags
}

// fleet turns settings into the workloads spec, filling resources and
// scheduling from the connection's GPU nodes where the settings leave them.
func (s fleetSettings) fleet(ctx context.Context, conn connection) (workloads.Fleet, error) {
	startup, err := time.ParseDuration(s.Rollout.StartupTimeout)
	if err != nil {
		return workloads.Fleet{}, fmt.Errorf("rollout.startup_timeout: %w", err)
	}
	drain, err := time.ParseDuration(s.Rollout.DrainTimeout)
	if err != nil {
		return workloads.Fleet{}, fmt.Errorf("rollout.drain_timeout: %w", err)
	}
	memory := 0.9
	if s.VLLM.GPUMemoryUtilization != nil {
		memory = *s.VLLM.GPUMemoryUtilization
	}
	f := workloads.Fleet{Name: s.Name, Namespace: s.Namespace, ServedName: s.Model.ServedName, ModelPath: s.Model.Path,
		Storage:  workloads.Storage{FileSystemID: s.Storage.FileSystemID, DNSName: s.Storage.DNSName, MountName: s.Storage.MountName, ExistingClaim: s.Storage.ClaimName},
		Replicas: int32(s.Replicas),
		VLLM: workloads.VLLM{Image: s.VLLM.Image, BlockSize: int(s.VLLM.BlockSize), GPUMemoryUtilization: memory,
			MaxModelLen: int(s.VLLM.MaxModelLen), MaxNumSeqs: int(s.VLLM.MaxNumSeqs), TensorParallelSize: int(s.VLLM.TensorParallelSize),
			SchedulingPolicy: s.VLLM.SchedulingPolicy, ExtraArgs: s.VLLM.ExtraArgs, Env: s.VLLM.Env},
		KVEvents: workloads.KVEvents{Port: int(s.KVEvents.Port), ReplayPort: int(s.KVEvents.ReplayPort), Topic: s.KVEvents.Topic},
		Rollout: workloads.Rollout{MaxUnavailable: int(s.Rollout.MaxUnavailable), MaxSurge: int(s.Rollout.MaxSurge), StartupSeconds: int(startup.Seconds()),
			DrainSeconds: int(drain.Seconds())},
		Baseline: workloads.Baseline{Enabled: s.Baseline.Enabled, Exposure: workloads.Exposure{Type: s.Baseline.Type, Port: int(s.Baseline.Port),
			Internal: s.Baseline.Internal == nil || *s.Baseline.Internal, SourceRanges: s.Baseline.SourceRanges, Annotations: s.Baseline.Annotations}},
	}
	if s.Baseline.Name != nil {
		f.Baseline.Name = *s.Baseline.Name
	}
	if a := s.Autoscaling; a != nil {
		down, err := time.ParseDuration(a.ScaleDownDelay)
		if err != nil {
			return workloads.Fleet{}, fmt.Errorf("autoscaling.scale_down_delay: %w", err)
		}
		zero, err := time.ParseDuration(a.ScaleToZeroAfter)
		if err != nil {
			return workloads.Fleet{}, fmt.Errorf("autoscaling.scale_to_zero_after: %w", err)
		}
		f.Autoscaling = &workloads.Autoscaling{Min: int32(a.MinReplicas), Max: int32(a.MaxReplicas),
			TargetPerPod: ptr.Deref(a.TargetPerPod, 0), TargetWorkPerPod: ptr.Deref(a.TargetWorkPerPod, 0), ScaleDownDelay: down, ScaleToZeroAfter: zero}
	}
	if s.Model.Source != nil {
		repo, rev, err := workloads.ParseSource(*s.Model.Source)
		if err != nil {
			return workloads.Fleet{}, err
		}
		f.Staging = &workloads.Staging{Repo: repo, Revision: rev, Image: s.VLLM.Image}
		if s.Model.StagingImage != nil {
			f.Staging.Image = *s.Model.StagingImage
		}
		// Off the GPU nodes: the cluster's system node group, as the router.
		if f.Staging.NodeSelector, f.Staging.Tolerations, err = conn.systemScheduling(ctx); err != nil {
			return workloads.Fleet{}, err
		}
	}
	instance, lookupErr := workloads.LookupInstance(conn.instanceType())
	f.Resources = workloads.Resources{CPU: instance.CPU, Memory: instance.Memory, MemoryLimit: instance.MemoryLimit, Shm: instance.Shm}
	if r := s.Resources; r != nil {
		for _, o := range []struct {
			from *string
			to   *string
		}{{r.CPU, &f.Resources.CPU}, {r.Memory, &f.Resources.Memory}, {r.MemoryLimit, &f.Resources.MemoryLimit}, {r.ShmSize, &f.Resources.Shm}} {
			if o.from != nil {
				*o.to = *o.from
			}
		}
	}
	if lookupErr != nil && (f.Resources.CPU == "" || f.Resources.Memory == "" || f.Resources.MemoryLimit == "" || f.Resources.Shm == "") {
		return workloads.Fleet{}, fmt.Errorf("resources: %w", lookupErr)
	}
	if f.NodeSelector, f.Tolerations, err = conn.gpuScheduling(ctx); err != nil {
		return workloads.Fleet{}, err
	}
	f.OnePerNode = instance.GPUs > 0 && int(s.VLLM.TensorParallelSize) >= instance.GPUs
	if sc := s.Scheduling; sc != nil {
		if sc.NodeSelector != nil {
			f.NodeSelector = sc.NodeSelector
		}
		if sc.Tolerations != nil {
			f.Tolerations = nil
			for _, t := range sc.Tolerations {
				tol, err := parseTaint(t)
				if err != nil {
					return workloads.Fleet{}, fmt.Errorf("scheduling.tolerations: %w", err)
				}
				f.Tolerations = append(f.Tolerations, tol)
			}
		}
		if sc.OnePerNode != nil {
			f.OnePerNode = *sc.OnePerNode
		}
	}
	if s.Storage.Bucket != "" {
		if conn.cluster == nil {
			return f, fmt.Errorf("storage.bucket: weights in S3 need `cluster` (llmd_inference_cluster.<name>.kubernetes): the fleet binds its service accounts to IAM roles with EKS Pod Identity in that cluster")
		}
		region := s.Storage.Region
		if region == "" {
			region = conn.cluster.Region.ValueString()
		}
		f.Storage.S3 = &workloads.S3Weights{Bucket: s.Storage.Bucket, Region: region}
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	mirrors, err := conn.imageMirrors(ctx)
	if err != nil {
		return f, err
	}
	return f.Mirrored(mirrors)
}

// annotation is the settings as the Deployment carries them.
func (s fleetSettings) annotation() string {
	b, _ := json.Marshal(s) // plain strings, numbers and maps: cannot fail
	return string(b)
}

// restore sets the model's inputs from a Deployment's settings annotation (import).
func (m *modelFleetModel) restore(ctx context.Context, raw string) diag.Diagnostics {
	var s fleetSettings
	var diags diag.Diagnostics
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		diags.AddError("Importing model fleet", fmt.Sprintf("the Deployment's %s annotation is not readable: %v", settingsAnnotation, err))
		return diags
	}
	if s.Baseline.Internal == nil { // written by a provider before baseline_service.internal
		s.Baseline.Internal = ptr.To(true)
	}
	if s.Baseline.SourceRanges == nil {
		s.Baseline.SourceRanges = []string{}
	}
	if s.Rollout.DrainTimeout == "" { // written by a provider before rollout.drain_timeout
		s.Rollout.DrainTimeout = defaultDrainTimeout
	}
	if s.VLLM.SchedulingPolicy == "" { // written by a provider before vllm.scheduling_policy
		s.VLLM.SchedulingPolicy = workloads.PolicyFCFS
	}
	m.Name, m.Namespace, m.Replicas = types.StringValue(s.Name), types.StringValue(s.Namespace), types.Int64Value(s.Replicas)
	m.ForceConflicts, m.WaitForRollout = types.BoolValue(s.ForceConflicts), types.BoolValue(s.WaitForRollout)
	for _, part := range []struct {
		from  any
		types map[string]attr.Type
		into  *types.Object
	}{{s.Model, fleetModelTypes, &m.Model}, {s.Storage, fleetStorageTypes, &m.Storage}, {s.VLLM, fleetVLLMTypes, &m.VLLM},
		{s.KVEvents, fleetKVTypes, &m.KVEvents}, {s.Rollout, fleetRolloutTypes, &m.Rollout}, {s.Baseline, fleetBaselineTypes, &m.BaselineService}} {
		v, d := encodeObject(ctx, part.from, part.types)
		diags.Append(d...)
		*part.into = v
	}
	m.Resources, m.Scheduling, m.Autoscaling = types.ObjectNull(fleetResourcesTypes), types.ObjectNull(fleetSchedulingTypes), types.ObjectNull(fleetAutoscalingTypes)
	if s.Autoscaling != nil {
		v, d := encodeObject(ctx, s.Autoscaling, fleetAutoscalingTypes)
		diags.Append(d...)
		m.Autoscaling = v
	}
	if s.Resources != nil {
		v, d := encodeObject(ctx, s.Resources, fleetResourcesTypes)
		diags.Append(d...)
		m.Resources = v
	}
	if s.Scheduling != nil {
		v, d := encodeObject(ctx, s.Scheduling, fleetSchedulingTypes)
		diags.Append(d...)
		m.Scheduling = v
	}
	return diags
}

var (
	fleetStorageTypes = map[string]attr.Type{"file_system_id": types.StringType, "dns_name": types.StringType, "mount_name": types.StringType, "claim_name": types.StringType,
		"bucket": types.StringType, "region": types.StringType}
	fleetResourcesTypes  = map[string]attr.Type{"cpu": types.StringType, "memory": types.StringType, "memory_limit": types.StringType, "shm_size": types.StringType}
	fleetSchedulingTypes = map[string]attr.Type{"node_selector": types.MapType{ElemType: types.StringType},
		"tolerations": types.ListType{ElemType: types.StringType}, "one_per_node": types.BoolType}
)

// routerTargetObject is the computed router_target.
func routerTargetObject(t workloads.RouterTarget) types.Object {
	return types.ObjectValueMust(routerTargetTypes, map[string]attr.Value{
		"namespace": types.StringValue(t.Namespace), "selector": types.StringValue(t.Selector), "http_port": types.Int64Value(int64(t.HTTPPort)),
		"kv_events_port": types.Int64Value(int64(t.KVEventsPort)), "replay_port": types.Int64Value(int64(t.ReplayPort)),
		"topic": types.StringValue(t.Topic), "block_size": types.Int64Value(int64(t.BlockSize)), "served_model": types.StringValue(t.ServedModel),
		"claim_name": types.StringValue(t.ClaimName), "model_path": types.StringValue(t.ModelPath),
		"tokenizer_path": types.StringValue(t.TokenizerPath), "tokenizer_config_path": types.StringValue(t.TokenizerConfigPath),
		"max_num_seqs": types.Int64Value(int64(t.MaxNumSeqs)), "deployment": types.StringValue(t.Deployment),
		"autoscaled": types.BoolValue(t.Autoscaled), "scale_to_zero_after": durationOrNull(t.ScaleToZeroAfter),
		"s3_region": stringOrNull(t.S3Region), "s3_reader_role": stringOrNull(t.S3ReaderRole),
		"scheduling_policy": types.StringValue(cmp.Or(t.SchedulingPolicy, workloads.PolicyFCFS))})
}

// stringOrNull is s, null when empty.
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// durationOrNull is d as the router's config reads it; null for 0 (a
// router imported from its settings reads it back so).
func durationOrNull(d time.Duration) types.String {
	if d == 0 {
		return types.StringNull()
	}
	return types.StringValue(d.String())
}

// baselineEndpoint is the in-cluster URL of the baseline Service.
func baselineEndpoint(f workloads.Fleet) string {
	if !f.Baseline.Enabled {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", f.BaselineName(), f.Namespace, f.Baseline.Port)
}

func (m *modelFleetModel) fields() anchoredFields {
	return anchoredFields{id: &m.ID, name: &m.Name, namespace: &m.Namespace, renderedHash: &m.RenderedHash,
		cluster: &m.Cluster, kubernetes: &m.Kubernetes, inventory: &m.Inventory, timeouts: &m.Timeouts}
}

func (m *modelFleetModel) imported() bool { return m.Model.IsNull() }
