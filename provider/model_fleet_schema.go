package provider

import (
	"context"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// Defaults of the seed deployment: Qwen2.5-7B-Instruct on one A10G per pod,
// 64-token blocks as the llm-d precise-prefix guide runs them.
const (
	// defaultVLLMImage is a vLLM release whose KV events are map-form with
	// the replay endpoint (PROTOCOLS.md section 1): the one the tests run.
	defaultVLLMImage = workloads.DefaultVLLMImage
	// defaultSchedulingPolicy lets the router's priority classes reach
	// the engines (vLLM's own default is fcfs).
	defaultSchedulingPolicy = workloads.PolicyPriority
	defaultModelName        = "Qwen/Qwen2.5-7B-Instruct"
	defaultModelPath        = "Qwen2.5-7B-Instruct"
	defaultTopic            = "kv@{ip}:{port}@{model}"
	defaultKVPort           = 5557
	defaultReplayPort       = 5558
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

	fleetModelTypes = map[string]attr.Type{"served_name": types.StringType, "path": types.StringType, "source": types.StringType, "staging_image": types.StringType}
	fleetVLLMTypes  = map[string]attr.Type{"image": types.StringType, "block_size": types.Int64Type, "gpu_memory_utilization": types.Float64Type,
		"max_model_len": types.Int64Type, "max_num_seqs": types.Int64Type, "tensor_parallel_size": types.Int64Type,
		"scheduling_policy": types.StringType, "extra_args": types.ListType{ElemType: types.StringType}, "env": types.MapType{ElemType: types.StringType}}
	fleetKVTypes          = map[string]attr.Type{"port": types.Int64Type, "replay_port": types.Int64Type, "topic": types.StringType}
	fleetRolloutTypes     = map[string]attr.Type{"max_unavailable": types.Int64Type, "max_surge": types.Int64Type, "startup_timeout": types.StringType, "drain_timeout": types.StringType}
	fleetAutoscalingTypes = map[string]attr.Type{"min_replicas": types.Int64Type, "max_replicas": types.Int64Type, "target_per_pod": types.Int64Type,
		"target_work_per_pod": types.Int64Type, "scale_down_delay": types.StringType, "scale_to_zero_after": types.StringType}
	fleetBaselineTypes = map[string]attr.Type{"enabled": types.BoolType, "name": types.StringType, "type": types.StringType, "port": types.Int64Type,
		"annotations": types.MapType{ElemType: types.StringType}, "internal": types.BoolType,
		"load_balancer_source_ranges": types.ListType{ElemType: types.StringType}}
	routerTargetTypes = map[string]attr.Type{"namespace": types.StringType, "selector": types.StringType, "http_port": types.Int64Type,
		"kv_events_port": types.Int64Type, "replay_port": types.Int64Type, "topic": types.StringType, "block_size": types.Int64Type,
		"served_model": types.StringType, "claim_name": types.StringType, "model_path": types.StringType,
		"tokenizer_path": types.StringType, "tokenizer_config_path": types.StringType, "max_num_seqs": types.Int64Type,
		"deployment": types.StringType, "autoscaled": types.BoolType, "scale_to_zero_after": types.StringType,
		"s3_region": types.StringType, "s3_reader_role": types.StringType, "scheduling_policy": types.StringType}
)

func (r *modelFleetResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := connectionAttributes("the fleet")
	for k, v := range map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			MarkdownDescription: "`<namespace>/<name>`."},
		"name": schema.StringAttribute{Required: true,
			MarkdownDescription: "Names the Deployment, the claim and the PodDisruptionBudget; labels every object (`llmd.dev/fleet`). Lower-case letters, digits and hyphens, at most 40. Changing it replaces the fleet.",
			Validators: []validator.String{stringvalidator.LengthBetween(1, 40),
				stringvalidator.RegexMatches(dnsLabel, "must be a DNS label: lower-case letters, digits and hyphens, starting with a letter")},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("llmd"),
			MarkdownDescription: "Namespace of the fleet, created when missing and deleted on destroy only when nothing else lives in it; default `llmd`. Changing it replaces the fleet.",
			Validators:          []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"model": schema.SingleNestedAttribute{Optional: true, Computed: true,
			Default: objectdefault.StaticValue(types.ObjectValueMust(fleetModelTypes, map[string]attr.Value{
				"served_name": types.StringValue(defaultModelName), "path": types.StringValue(defaultModelPath),
				"source": types.StringNull(), "staging_image": types.StringNull()})),
			MarkdownDescription: "The model served, and optionally where to stage its weights from.",
			Attributes: map[string]schema.Attribute{
				"served_name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultModelName),
					MarkdownDescription: "Name requests carry (`--served-model-name`); default `" + defaultModelName + "`."},
				"path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultModelPath),
					Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[^/.][^\s]*$`), "must be a relative path on the volume, such as Qwen2.5-7B-Instruct")},
					MarkdownDescription: "Directory of the weights on the volume, relative to its root; `tokenizer.json` and `tokenizer_config.json` sit there too. With `source`, each commit is staged into `<path>/<commit>` and served from there. Default `" + defaultModelPath + "`."},
				"source": schema.StringAttribute{Optional: true,
					MarkdownDescription: "`hf://<org>/<model>@<commit>` (the full 40-hex commit: a branch or tag moves): before the rollout, a Job downloads that commit into `<path>/<commit>` on the volume " +
						"and the pods start only after it completed. A new commit is staged beside the one the pods serve, then the pods roll onto it one at a time (and `router_target`'s tokenizer paths follow); " +
						"the old directory stays on the volume (its storage is FSx capacity you pay for: delete it by hand once no pod reads it). The Job runs off the GPU nodes (the system node group on an llmd cluster), " +
						"gives up after 3 hours, and is run anew by the next apply when it failed, keeping the files it finished. A commit staged by a provider before this layout (in `path` itself) is linked, not downloaded again. " +
						"Unset: the weights are already in `path` (an FSx data repository association, or staged by hand)."},
				"staging_image": schema.StringAttribute{Optional: true,
					MarkdownDescription: "Image of the staging Job (needs `huggingface_hub` and a shell); default the vLLM image, which has both."},
			}},
		"hf_token": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
			MarkdownDescription: "Hugging Face token for `model.source` (gated models). Write-only: kept in a Kubernetes Secret for the staging Job, never in Terraform state or plan. Needs Terraform 1.11."},
		"storage": schema.SingleNestedAttribute{Required: true,
			MarkdownDescription: "Where the weights are: `llmd_inference_cluster.<name>.model_storage` as is (an FSx for Lustre file system, mounted read-only through a static " +
				"PersistentVolume with reclaim policy Retain: destroying the fleet never touches the file system), `claim_name` of an existing claim in the namespace, " +
				"or `llmd_inference_cluster.<name>.model_bucket` as is (`bucket` and `region`: an S3 bucket the pods stream the weights from with the Run:ai Model Streamer, " +
				"`--load-format runai_streamer`). With a bucket, `model.path` is the key prefix the revisions live under (`s3://<bucket>/<path>/<commit>/`), the fleet " +
				"needs `cluster` (it binds its service accounts with EKS Pod Identity there), and it makes two IAM roles: a reader for its pods and its router " +
				"(s3:GetObject under the prefix, s3:ListBucket limited to it) and a writer for the staging Job (also s3:PutObject); neither may delete. Destroying the fleet " +
				"removes the roles and their associations, never the bucket's objects.",
			Attributes: map[string]schema.Attribute{
				"file_system_id": schema.StringAttribute{Optional: true, MarkdownDescription: "FSx file system id (`fs-...`)."},
				"dns_name":       schema.StringAttribute{Optional: true, MarkdownDescription: "DNS name of the file system."},
				"mount_name":     schema.StringAttribute{Optional: true, MarkdownDescription: "Lustre mount name of the file system."},
				"claim_name":     schema.StringAttribute{Optional: true, MarkdownDescription: "An existing PersistentVolumeClaim instead of the file system."},
				"bucket":         schema.StringAttribute{Optional: true, MarkdownDescription: "S3 bucket holding the weights, instead of a volume."},
				"region":         schema.StringAttribute{Optional: true, MarkdownDescription: "Region of `bucket`; default the cluster's."},
			}},
		"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8),
			Validators:          []validator.Int64{int64validator.Between(0, 512)},
			MarkdownDescription: "vLLM pods, one per GPU node by default; default `8`. Changes in place, one pod at a time. Not with `autoscaling`, which sizes the fleet instead."},
		"autoscaling":      fleetAutoscalingAttribute(),
		"vllm":             vllmAttribute(),
		"kv_events":        kvEventsAttribute(),
		"resources":        fleetResourcesAttribute(),
		"scheduling":       fleetSchedulingAttribute(),
		"rollout":          fleetRolloutAttribute(),
		"baseline_service": fleetBaselineAttribute(),
		"force_conflicts": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			MarkdownDescription: "Take over fields another field manager (a `kubectl edit`, another controller) changed on the fleet's objects. Default `false`: such a field is an apply error naming the manager and the field."},
		"wait_for_rollout": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
			MarkdownDescription: "Wait until every replica is ready; default `true`. The wait fails early with the reason (unschedulable, image pull, crash loop with the last log lines)."},
		"router_target": schema.SingleNestedAttribute{Computed: true,
			MarkdownDescription: "Everything `llmd_prefix_router` needs (pass it as `fleet`): namespace, pod selector, ports, KV-event topic template, block size, served model, claim and tokenizer paths, and each pod's batch limit.",
			Attributes: map[string]schema.Attribute{
				"namespace": computedString("Namespace of the pods."), "selector": computedString("Label selector of the pods."),
				"http_port": computedInt("vLLM's HTTP port."), "kv_events_port": computedInt("KV-event publisher port."),
				"replay_port": computedInt("KV-event replay port."), "topic": computedString("KV-event topic template (`{ip}`, `{port}`, `{model}`)."),
				"block_size": computedInt("vLLM block size."), "served_model": computedString("Served model name."),
				"claim_name": computedString("Claim holding the weights."), "model_path": computedString("Model directory on the volume."),
				"tokenizer_path":        computedString("tokenizer.json on the volume."),
				"tokenizer_config_path": computedString("tokenizer_config.json on the volume."),
				"s3_region":             computedString("With weights in S3, the bucket's region (the tokenizer paths are then s3:// URIs); null otherwise."),
				"s3_reader_role":        computedString("With weights in S3, the IAM role (name) that reads them, which the router binds its service account to; null otherwise."),
				"max_num_seqs":          computedInt("vLLM's `--max-num-seqs` (`vllm.max_num_seqs`): the requests one pod runs at once, the router's default capacity of a pod."),
				"scheduling_policy":     computedString("vLLM's scheduling policy (`vllm.scheduling_policy`): with `priority` the router sets each request's vLLM `priority` from its class."),
				"deployment":            computedString("The fleet's Deployment."),
				"autoscaled":            schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether `autoscaling` sizes the fleet on the router's work or demand, which the router then serves to the fleet's HPA."},
				"scale_to_zero_after":   computedString("With `autoscaling.min_replicas = 0`, how long the fleet has no demand before the router takes it to zero; null otherwise."),
			}},
		"baseline_endpoint": schema.StringAttribute{Computed: true,
			MarkdownDescription: "In-cluster URL of the round-robin baseline Service, for the A/B benchmark; empty when disabled."},
		"ready_replicas": schema.Int64Attribute{Computed: true,
			MarkdownDescription: "Replicas ready at the last apply or refresh."},
		"rendered_hash": schema.StringAttribute{Computed: true,
			MarkdownDescription: "Digest of the objects the configuration renders. A refresh that finds llmd's fields changed behind Terraform's back, or an object gone, records `drift: ...` naming them, so the plan shows the repair."},
		"inventory": schema.ListAttribute{ElementType: types.StringType, Computed: true,
			MarkdownDescription: "The objects applied (`group/version/Kind/namespace/name`): what an update prunes and a destroy deletes."},
	} {
		attrs[k] = v
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A vLLM fleet on the cluster: the decode Deployment on the FSx weights with vLLM's KV-cache events on, the round-robin " +
			"baseline Service for A/B runs, a PodDisruptionBudget and (when the prometheus-operator CRD exists at apply) a PodMonitor. Objects are applied " +
			"server-side under the field manager `llmd`; only the fields llmd sets are compared on refresh, so other controllers never cause a diff.",
		Attributes: attrs,
		Blocks:     map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true})},
	}
}

func computedString(desc string) schema.StringAttribute {
	return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
}

func computedInt(desc string) schema.Int64Attribute {
	return schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
}

func vllmAttribute() schema.SingleNestedAttribute {
	emptyList := types.ListValueMust(types.StringType, []attr.Value{})
	emptyMap := types.MapValueMust(types.StringType, map[string]attr.Value{})
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(fleetVLLMTypes, map[string]attr.Value{
			"image": types.StringValue(defaultVLLMImage), "block_size": types.Int64Value(64), "gpu_memory_utilization": types.Float64Null(),
			"max_model_len": types.Int64Value(8192), "max_num_seqs": types.Int64Value(256), "tensor_parallel_size": types.Int64Value(1),
			"scheduling_policy": types.StringValue(defaultSchedulingPolicy), "extra_args": emptyList, "env": emptyMap})),
		MarkdownDescription: "The engine. Every change rolls the pods, one at a time.",
		Attributes: map[string]schema.Attribute{
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultVLLMImage),
				MarkdownDescription: "vLLM image; default `" + defaultVLLMImage + "` (map-form KV events with replay), the release the router's real-engine tests run; pinned by tag, since no public record states its digest: " +
					"`crane digest vllm/vllm-openai:v0.32.0` (or `skopeo inspect --format '{{.Digest}}' docker://docker.io/vllm/vllm-openai:v0.32.0`) resolves it, to pin as `vllm/vllm-openai:v0.32.0@sha256:<digest>`. " +
					"Any reference a runtime pulls is accepted: `repo:tag`, `repo@sha256:<digest>` or `repo:tag@sha256:<digest>` (the digest is what is pulled). " +
					"The fleet passes `--enable-scale-out` and `--disable-access-log-for-endpoints`, so the image must be vLLM 0.30 or later."},
			"block_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(64),
				Validators:          []validator.Int64{int64validator.OneOf(16, 32, 64, 128)},
				MarkdownDescription: "Tokens per KV block (`--block-size`); the router keys its index by it. Default `64`."},
			// No schema default: a float64 default differs from the same number read back from state
			// at cty's precision, which would plan a change forever.
			"gpu_memory_utilization": schema.Float64Attribute{Optional: true,
				Validators: []validator.Float64{float64validator.Between(0.1, 0.98)}, MarkdownDescription: "Share of GPU memory vLLM takes; default `0.9`."},
			"max_model_len": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8192),
				Validators: []validator.Int64{int64validator.AtLeast(256)}, MarkdownDescription: "Longest context; default `8192`."},
			"max_num_seqs": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(256),
				Validators: []validator.Int64{int64validator.Between(1, 4096)}, MarkdownDescription: "Sequences batched at once; default `256`."},
			"tensor_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.OneOf(1, 2, 4, 8)}, MarkdownDescription: "GPUs per pod; default `1`."},
			"scheduling_policy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultSchedulingPolicy),
				Validators: []validator.String{stringvalidator.OneOf(workloads.PolicyFCFS, workloads.PolicyPriority)},
				MarkdownDescription: "vLLM's `--scheduling-policy`; default `" + defaultSchedulingPolicy + "`. With `priority` each engine takes waiting requests in order of their " +
					"`priority` (then arrival) and, when its KV cache runs out, preempts the lowest-priority running request first; the router (`llmd_prefix_router`, " +
					"given `router_target`) then sets every request's `priority` to its class's rank (0 for the highest class), overriding the client's, and lets a " +
					"request past `limits.max_pending_per_pod` of lower classes' requests, since the engine puts it ahead of them. With `fcfs` (vLLM's default) " +
					"the engine keeps arrival order and the classes act in the router's queue only."},
			"extra_args": schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true, Default: listdefault.StaticValue(emptyList),
				MarkdownDescription: "More `vllm serve` flags. Flags the fleet sets itself (block size, ports, KV events, model, memory, TP) are refused: use their attributes."},
			"env": schema.MapAttribute{ElementType: types.StringType, Optional: true, Computed: true, Default: mapdefault.StaticValue(emptyMap),
				MarkdownDescription: "More environment variables (`VLLM_PORT`, `POD_IP`, `USER` and `HF_HUB_OFFLINE` are the fleet's)."},
		}}
}

func kvEventsAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(fleetKVTypes, map[string]attr.Value{
			"port": types.Int64Value(defaultKVPort), "replay_port": types.Int64Value(defaultReplayPort), "topic": types.StringValue(defaultTopic)})),
		MarkdownDescription: "vLLM's KV-cache event publisher, which the router subscribes to.",
		Attributes: map[string]schema.Attribute{
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultKVPort),
				Validators: []validator.Int64{int64validator.Between(1024, 65535)}, MarkdownDescription: "ZeroMQ PUB port; default `5557`."},
			"replay_port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultReplayPort),
				Validators: []validator.Int64{int64validator.Between(1024, 65535)}, MarkdownDescription: "Replay (ROUTER) port; default `5558`."},
			"topic": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultTopic),
				MarkdownDescription: "Topic template, `{ip}`, `{port}` and `{model}` replaced per pod; default llm-d's `" + defaultTopic + "`."},
		}}
}

func fleetResourcesAttribute() schema.SingleNestedAttribute {
	opt := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc}
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Per-pod CPU and memory. Unset values come from the GPU instance type (the cluster's, or `kubernetes.instance_type`): " +
			"g5.xlarge gets cpu `3`, memory `12Gi`, memory_limit `14Gi`, shm_size `2Gi`, which fit its allocatable beside EKS's DaemonSets. GPUs are `tensor_parallel_size`.",
		Attributes: map[string]schema.Attribute{
			"cpu": opt("CPU request."), "memory": opt("Memory request."), "memory_limit": opt("Memory limit (covers /dev/shm)."),
			"shm_size": opt("Size of the in-memory /dev/shm."),
		}}
}

func fleetSchedulingAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Where the pods go. Unset: the cluster's GPU node group labels as node selector and its taints tolerated " +
			"(a `kubernetes` cluster: tolerate `nvidia.com/gpu:NoSchedule`, no selector). Setting a value replaces that default.",
		Attributes: map[string]schema.Attribute{
			"node_selector": schema.MapAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Node labels the pods require."},
			"tolerations": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Taints tolerated, `key=value:Effect` or `key:Effect` (any value)."},
			"one_per_node": schema.BoolAttribute{Optional: true, MarkdownDescription: "At most one fleet pod per node; default true when a pod takes all of its instance's GPUs."},
		}}
}

func fleetRolloutAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(fleetRolloutTypes, map[string]attr.Value{
			"max_unavailable": types.Int64Value(1), "max_surge": types.Int64Value(0), "startup_timeout": types.StringValue("20m"),
			"drain_timeout": types.StringValue(defaultDrainTimeout)})),
		MarkdownDescription: "Rolling updates. There are no spare GPUs, so the default replaces one pod at a time without a surge.",
		Attributes: map[string]schema.Attribute{
			"max_unavailable": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "Pods down at once; default `1`."},
			"max_surge": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
				Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "Extra pods during a rollout; default `0`."},
			"startup_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("20m"),
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 20m")},
				MarkdownDescription: "Startup probe budget for a cold load of the weights; default `20m`."},
			"drain_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultDrainTimeout),
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 60s")},
				MarkdownDescription: "How long a pod that is stopping (a rollout, a scale-in) lets its open requests finish: vLLM's `--shutdown-timeout`, after a 5 s `preStop` " +
					"while the baseline Service stops sending it requests (the router stops at once), within a grace period of both plus 15 s. " +
					"Set it above your longest request (`max_model_len` tokens of output at your decode speed); `0s` aborts open requests on SIGTERM, vLLM's own default. Default `" + defaultDrainTimeout + "`."},
		}}
}

// defaultDrainTimeout covers a 2,048-token answer at the A10G's ~25 ms a
// token (BENCHMARK.md's Qwen2.5-7B), with room to spare.
const defaultDrainTimeout = "60s"

func fleetAutoscalingAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Size the fleet on the router's counts instead of `replicas`: a HorizontalPodAutoscaler (`autoscaling/v2`) on External metrics " +
			"that `llmd_prefix_router` serves from its exact counts, every router replica's: by default its work, `llmd-router-work` (tokens a second over the last minute: " +
			"each request's prompt tokens the router found uncached on the pod it chose, plus its `max_tokens` up to 1,024, or 1,024 when it sets none), " +
			"replicas = ceil(work / `target_work_per_pod`); with `target_per_pod`, its demand, `llmd-router-demand` (requests in flight on the fleet's pods plus those waiting in the router), " +
			"replicas = ceil(demand / `target_per_pod`); with both, the larger; always between `min_replicas` and `max_replicas`. " +
			"The work grows when the pods' prefix caches miss and does not fall as pods are added, so the HPA lands on the fleet the load needs; " +
			"requests in flight fall as pods are added (shorter batches, shorter requests), so on demand the fleet swings around its target (BENCHMARKS.md, the virtual day). " +
			"The router registers its metrics API with the cluster's aggregation layer " +
			"(`v1beta1.external.metrics.k8s.io`, one per cluster: a cluster where KEDA or prometheus-adapter serves it already is an apply error). " +
			"The Deployment is then applied without replicas, which the autoscaler owns (switching an existing fleet keeps its current count until the HPA moves it). " +
			"With `min_replicas = 0` the router takes the fleet to zero after `scale_to_zero_after` with no demand and back to one pod when a request comes; " +
			"the request waits, up to its class's time-to-live (`limits.priority_classes`, default 30 s), so set that above the pod's start (the weights' load from FSx and vLLM's warm-up: minutes for a 7B model).",
		Attributes: map[string]schema.Attribute{
			"min_replicas": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.Between(0, 512)},
				MarkdownDescription: "Fewest pods; `0` lets the router take an idle fleet to zero."},
			"max_replicas": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.Between(1, 512)},
				MarkdownDescription: "Most pods; at least `min_replicas`. The GPU nodes must hold them."},
			"target_work_per_pod": schema.Int64Attribute{Optional: true, Computed: true, PlanModifiers: []planmodifier.Int64{workTargetDefault{}},
				Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "Tokens a second of the router's work per pod the autoscaler aims at. Keep it below what a pod serves at full speed " +
					"(on the seed's A10G pods, Qwen2.5-7B with its 2,048-token shared prefixes held in cache, about 2,100 to 2,250) by more than the HPA's 10% tolerance: " +
					"a fleet at its capacity reports what it serves, so only a target that far below it scales the fleet out of a backlog, and the margin absorbs a ramp while new pods start. " +
					"Default `1800` when `target_per_pod` is not set; null (the work not read) when it is and this is not."},
			"target_per_pod": schema.Int64Attribute{Optional: true,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "Requests in flight or waiting per pod the autoscaler aims at, to scale on the router's demand. Keep it below what a pod holds at full speed " +
					"(on the seed's A10G pods about 100 at once). Not set by default."},
			"scale_down_delay": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("5m"),
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 5m")},
				MarkdownDescription: "The HPA scales in to the highest size it wanted over this window (its scale-down stabilization window, at most 1h); default `5m`, the HPA's own."},
			"scale_to_zero_after": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("15m"),
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 15m")},
				MarkdownDescription: "With `min_replicas = 0`, how long the fleet has no demand before the router takes it to zero; default `15m`."},
		}}
}

// defaultTargetWorkPerPod is about 5/6 of the work a seed pod (A10G,
// Qwen2.5-7B) serves at its capacity: far enough below it, beyond the HPA's
// 10% tolerance, that a saturated fleet, reporting what it serves, still
// asks for more pods (BENCHMARKS.md, 2026-12-07: 2,000 held the virtual
// day's peak only by arriving there with pods to spare, 2,100 did not).
const defaultTargetWorkPerPod = 1800

// workTargetDefault plans autoscaling.target_work_per_pod: as configured;
// else defaultTargetWorkPerPod when target_per_pod is not configured either,
// so the fleet scales on the router's work; else null, the fleet scaling on
// its demand alone.
type workTargetDefault struct{}

func (workTargetDefault) Description(context.Context) string {
	return "defaults to 1800 unless target_per_pod is set"
}

func (d workTargetDefault) MarkdownDescription(ctx context.Context) string { return d.Description(ctx) }

func (workTargetDefault) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var demand types.Int64
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, req.Path.ParentPath().AtName("target_per_pod"), &demand)...)
	switch {
	case demand.IsUnknown():
		resp.PlanValue = types.Int64Unknown()
	case demand.IsNull():
		resp.PlanValue = types.Int64Value(defaultTargetWorkPerPod)
	default:
		resp.PlanValue = types.Int64Null()
	}
}

func fleetBaselineAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(fleetBaselineTypes, map[string]attr.Value{
			"enabled": types.BoolValue(true), "name": types.StringNull(), "type": types.StringValue("ClusterIP"), "port": types.Int64Value(8000),
			"annotations": types.MapValueMust(types.StringType, map[string]attr.Value{}), "internal": types.BoolValue(true),
			"load_balancer_source_ranges": types.ListValueMust(types.StringType, []attr.Value{})})),
		MarkdownDescription: "The round-robin Service over the pods: the A/B baseline the router is measured against. It has no API key of its own " +
			"(vLLM's `--api-key` leaves `/invocations` open), so a `LoadBalancer` is internal by default and internet-facing only with `load_balancer_source_ranges`.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), MarkdownDescription: "Default `true`."},
			"name": schema.StringAttribute{Optional: true,
				Validators:          []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label"), stringvalidator.NoneOf("vllm")},
				MarkdownDescription: "Service name; default `<name>-baseline`. Never `vllm` (Kubernetes would inject `VLLM_PORT`, which vLLM misreads)."},
			"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ClusterIP"),
				Validators:          []validator.String{stringvalidator.OneOf("ClusterIP", "LoadBalancer")},
				MarkdownDescription: "`ClusterIP` (default: in-cluster only, free) or `LoadBalancer` (an AWS Network Load Balancer, billed per hour and per LCU while it exists)."},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8000),
				Validators: []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "Service port; default `8000`."},
			"internal": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "A `LoadBalancer` inside the VPC (default `true`); `false` faces the internet and requires `load_balancer_source_ranges`. " +
					"Sets `service.beta.kubernetes.io/aws-load-balancer-internal` (EKS's built-in controller) and `aws-load-balancer-scheme` (the AWS Load Balancer Controller), with `aws-load-balancer-type = nlb`."},
			"load_balancer_source_ranges": schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				Default:             listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})),
				MarkdownDescription: "CIDRs allowed to reach a `LoadBalancer` (enforced in the nodes' security group rules)."},
			"annotations": schema.MapAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				Default:             mapdefault.StaticValue(types.MapValueMust(types.StringType, map[string]attr.Value{})),
				MarkdownDescription: "More Service annotations, overriding the defaults of `internal`."},
		}}
}
