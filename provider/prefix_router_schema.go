package provider

import (
	"context"
	"maps"
	"regexp"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// The KV bound's defaults (limits.kv_output_reserve, limits.kv_headroom)
// and the prefill bound's (limits.max_pending_prefill_per_pod: vLLM's
// --max-num-batched-tokens on GPUs under 70 GiB, vllm/engine/arg_utils.py
// of v0.32.0, one step's tokens; limits.prefill_reserve: a quarter of the
// pods, BENCHMARKS.md 2026-12-07 twelfth session).
const (
	defaultKVOutputReserve = 1024
	defaultKVHeadroom      = 0.1
	defaultPendingPrefill  = 2048
	defaultPrefillReserve  = 0.25
)

var (
	durationText = regexp.MustCompile(`^\d+(ms|s|m|h)$`)
	flowName     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	sha256Hex    = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

	routerScorerTypes  = map[string]attr.Type{"type": types.StringType, "weight": types.Float64Type, "params": types.MapType{ElemType: types.Float64Type}}
	routerScoringTypes = map[string]attr.Type{"preset": types.StringType,
		"scorers": types.ListType{ElemType: types.ObjectType{AttrTypes: routerScorerTypes}}}
	routerClassTypes  = map[string]attr.Type{"name": types.StringType, "ttl": types.StringType}
	routerLimitsTypes = map[string]attr.Type{"max_in_flight_per_pod": types.Int64Type, "max_pending_per_pod": types.Int64Type, "max_queue": types.Int64Type,
		"max_pending_prefill_per_pod": types.Int64Type, "prefill_reserve": types.Float64Type, "kv_output_reserve": types.Int64Type, "kv_headroom": types.Float64Type,
		"queue_timeout": types.StringType, "drain_timeout": types.StringType,
		"priority_classes": types.ListType{ElemType: types.ObjectType{AttrTypes: routerClassTypes}}, "default_class": types.StringType,
		"tenant_share": types.Float64Type}
	routerAPIKeyTypes  = map[string]attr.Type{"sha256": types.StringType, "tenant": types.StringType, "class": types.StringType}
	routerServiceTypes = map[string]attr.Type{"type": types.StringType, "internal": types.BoolType, "port": types.Int64Type,
		"annotations": types.MapType{ElemType: types.StringType}, "load_balancer_source_ranges": types.ListType{ElemType: types.StringType}}
	routerResourcesTypes  = map[string]attr.Type{"cpu": types.StringType, "memory": types.StringType, "memory_limit": types.StringType}
	routerSchedulingTypes = map[string]attr.Type{"node_selector": types.MapType{ElemType: types.StringType}, "tolerations": types.ListType{ElemType: types.StringType}}
	routerMetricsTypes    = map[string]attr.Type{"service_monitor": types.BoolType}
	routerGatewayTypes    = map[string]attr.Type{"failure_mode": types.StringType, "port": types.Int64Type, "target_port": types.Int64Type,
		"selector": types.MapType{ElemType: types.StringType}}
)

func (r *prefixRouterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := connectionAttributes("the router")
	for k, v := range map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			MarkdownDescription: "`<namespace>/<name>`."},
		"fleet": routerFleetAttribute(),
		"name": schema.StringAttribute{Required: true,
			MarkdownDescription: "Names the Deployment, Service, ServiceAccount, Role, ConfigMap and PodDisruptionBudget; labels every object (`llmd.dev/router`). Changing it replaces the router.",
			Validators: []validator.String{stringvalidator.LengthBetween(1, 40),
				stringvalidator.RegexMatches(dnsLabel, "must be a DNS label: lower-case letters, digits and hyphens, starting with a letter")},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"namespace": schema.StringAttribute{Optional: true, Computed: true,
			MarkdownDescription: "Namespace of the router; default the fleet's (at creation). Another namespace only works for a fleet without tokenizer files: " +
				"the router mounts the fleet's claim, which only pods in its namespace can. The Role and RoleBinding that let it watch the fleet's pods are always in the fleet's namespace. Changing it replaces the router.",
			Validators: []validator.String{stringvalidator.LengthBetween(1, 63), stringvalidator.RegexMatches(dnsLabel, "must be a DNS label")},
			// Kept from state: an update elsewhere never re-derives it and so never replaces the router.
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()}},
		"image": schema.StringAttribute{Optional: true, Computed: true,
			MarkdownDescription: "Router image; default the image built from the same commit as the provider, pinned by the digest of its image index (`" + buildinfo.ImageRepository + ":<provider version>@sha256:...`, linux/amd64 and linux/arm64, so Graviton system nodes pull their own; `terraform-provider-llmd -version` prints it). " +
				"A development build of the provider pins no image and requires this. A tag other than the pinned one is a plan warning."},
		"api_key": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
			MarkdownDescription: "Key clients must present as `Authorization: Bearer <key>` on `/v1` paths (as vLLM's `--api-key`). Write-only: never in state or plan; " +
				"kept in the Secret `<name>-api-key` and read by the pods at start. Requires `api_key_version` and Terraform 1.11."},
		"api_keys": schema.ListNestedAttribute{Optional: true, Validators: []validator.List{listvalidator.SizeBetween(1, 1000)},
			MarkdownDescription: "More accepted keys, each by its SHA-256 (`sha256(random_password.team_a.result)`: only digests reach the plan, the state and the router's ConfigMap), " +
				"each naming its requests' tenant and class. A request presenting one takes its tenant (fairness and `tenant_share` count per tenant) and its class, " +
				"also the highest its `x-llmd-priority` header may ask for. With `api_key` both are accepted. Use random keys: a digest of a guessable key can be searched.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"sha256": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.RegexMatches(sha256Hex, "must be 64 hex digits: give sha256(key)")},
					MarkdownDescription: "The key's SHA-256 in hex."},
				"tenant": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthBetween(1, 63),
					stringvalidator.RegexMatches(flowName, "must be letters, digits, '-', '_' or '.'")},
					MarkdownDescription: "Tenant of the key's requests; unset, the `x-llmd-tenant` header's."},
				"class": schema.StringAttribute{Optional: true,
					MarkdownDescription: "Class of the key's requests and the highest they may name; unset, `default_class` and no ceiling."},
			}}},
		"api_key_version": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Set with `api_key`, any value; change it to roll the router pods to a new key (a write-only value is never compared, so only this shows a new key in the plan)."},
		"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(2),
			Validators: []validator.Int64{int64validator.Between(1, 32)},
			MarkdownDescription: "Router pods, spread over nodes, each keeping its own full index from the KV events; default `2`, with a PodDisruptionBudget of one unavailable. " +
				"The replicas decide as one router: each tells the others, as it happens, the speculative index entries and in-flight counts of its decisions " +
				"(gRPC on port 9092 between the pods, found through the API server), and a starting replica (a rollout, a crash, a scale-out) takes a peer's index " +
				"instead of replaying every engine; a replica that loses its peers decides alone. Each replica costs its CPU and memory request " +
				"(`resources`) and follows every engine's KV events itself; the exchange sends each peer 8 bytes per prompt block of each request (1 KB for a 2,048-token prompt at block size 16) and a full report each second. " +
				"The default system node group has one node, so both replicas share it and the plan warns: they cover a crashed pod and a rollout, not the node's loss " +
				"(routing stops until EKS replaces it). A second system node (`system_node_group.desired_size = 2` on the cluster, one more m6i.4xlarge) covers that."},
		"block_size": schema.Int64Attribute{Optional: true,
			MarkdownDescription: "Pins the expected vLLM block size: a plan error when it is not `fleet.block_size`. Unset: the fleet's."},
		"served_model": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Pins the expected served model: a plan error when it is not `fleet.served_model`. Unset: the fleet's."},
		"gateway": routerGatewayAttribute(),
		"inference_pool": schema.StringAttribute{Computed: true,
			MarkdownDescription: "In gateway mode, the InferencePool's name (the router's `name`, in the fleet's namespace): the `backendRef` of the team's HTTPRoute. Null in proxy mode."},
		"scoring":    routerScoringAttribute(),
		"limits":     routerLimitsAttribute(),
		"service":    routerServiceAttribute(),
		"resources":  routerResourcesAttribute(),
		"scheduling": routerSchedulingAttribute(),
		"log_level": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("info"),
			Validators:          []validator.String{stringvalidator.OneOf("debug", "info", "warn", "error")},
			MarkdownDescription: "`debug` (every request), `info` (default), `warn` or `error`."},
		"metrics": schema.SingleNestedAttribute{Optional: true,
			MarkdownDescription: "Scraping. The router serves Prometheus metrics on its HTTP port at `/metrics`.",
			Attributes: map[string]schema.Attribute{
				"service_monitor": schema.BoolAttribute{Optional: true,
					MarkdownDescription: "Apply a prometheus-operator ServiceMonitor. Unset: when the cluster serves the CRD at apply time (never asked at plan). " +
						"`true` without the CRD is an apply error; `false` never."},
			}},
		"force_conflicts": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			MarkdownDescription: "Take over fields another field manager changed on the router's objects. Default `false`: such a field is an apply error naming the manager."},
		"wait_for_rollout": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
			MarkdownDescription: "Wait until every router pod is ready; default `true`."},
		"url": schema.StringAttribute{Computed: true,
			MarkdownDescription: "In-cluster URL of the router Service: the OpenAI-compatible endpoint (`/v1/completions`, `/v1/chat/completions`, `/v1/route`). Empty in gateway mode, where clients go through the gateway."},
		"load_balancer_hostname": schema.StringAttribute{Computed: true,
			MarkdownDescription: "The load balancer's hostname once the cloud has assigned it (a `LoadBalancer` service); empty otherwise."},
		"config_hash": schema.StringAttribute{Computed: true,
			MarkdownDescription: "Digest of the router's configuration file; a change rolls the router pods (and only them)."},
		"rendered_hash": schema.StringAttribute{Computed: true,
			MarkdownDescription: "Digest of the objects the configuration renders; `drift: ...` after a refresh that found llmd's fields changed or an object gone."},
		"inventory": schema.ListAttribute{ElementType: types.StringType, Computed: true,
			MarkdownDescription: "The objects applied (`group/version/Kind/namespace/name`): what an update prunes and a destroy deletes."},
	} {
		attrs[k] = v
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The prefix-cache-aware `llmd-router` in front of a `llmd_model_fleet`: it follows the fleet's pods through the Kubernetes API, " +
			"subscribes to their KV-cache events and sends each request to the pod holding the longest cached prefix. Objects: ServiceAccount, a Role " +
			"and RoleBinding that may only get, list and watch pods in the fleet's namespace, a ConfigMap with the router's configuration, the Deployment " +
			"(pod security `restricted`, the fleet's tokenizer files mounted read-only from its claim), the Service, a PodDisruptionBudget, " +
			"a NetworkPolicy letting only the router's own pods reach their peer port (9092, never on the Service), a ServiceMonitor, " +
			"a PrometheusRule when the cluster serves it (`LLMDRouterDown`, `LLMDRouterPodsOut`, `LLMDRouterSilent`) and, with `api_key`, the Secret holding the key. " +
			"With `gateway`, the router is instead the endpoint picker of the team's own Gateway, and an InferencePool over the fleet's pods names it (gateway mode).",
		Attributes: attrs,
		Blocks:     map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true})},
	}
}

func routerFleetAttribute() schema.SingleNestedAttribute {
	req := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Required: true, MarkdownDescription: desc}
	}
	optS := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc}
	}
	port := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Required: true, MarkdownDescription: desc, Validators: []validator.Int64{int64validator.Between(1, 65535)}}
	}
	return schema.SingleNestedAttribute{Required: true,
		MarkdownDescription: "The fleet to route to: `llmd_model_fleet.<name>.router_target`, passed as is, so block size, model, ports and topic agree by construction.",
		Attributes: map[string]schema.Attribute{
			"namespace": req("Namespace of the fleet's pods."), "selector": req("Label selector of the fleet's pods."),
			"http_port": port("vLLM's HTTP port."), "kv_events_port": port("KV-event publisher port."),
			"replay_port": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.Between(0, 65535)},
				MarkdownDescription: "KV-event replay port; `0` for a fleet without replay."},
			"topic":        req("KV-event topic template."),
			"block_size":   schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "vLLM block size."},
			"served_model": req("Served model name."), "claim_name": optS("Claim holding the tokenizer files."), "model_path": optS("Model directory on the volume."),
			"tokenizer_path": optS("tokenizer.json on the volume."), "tokenizer_config_path": optS("tokenizer_config.json on the volume."),
			"max_num_seqs": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "vLLM's `--max-num-seqs`: each pod's capacity unless `limits.max_in_flight_per_pod` sets one; unset (a fleet deployed another way), no cap."},
			"scheduling_policy": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.OneOf(workloads.PolicyFCFS, workloads.PolicyPriority)},
				MarkdownDescription: "The engines' vLLM `--scheduling-policy`: with `priority` the router sets each request's vLLM `priority` to its class's rank and holds a request behind `limits.max_pending_per_pod` of its own class and higher only; `fcfs` or unset, neither."},
			"deployment": optS("The fleet's Deployment, which the router scales from and to zero with `scale_to_zero_after`."),
			"autoscaled": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "The fleet's HPA sizes it on the router's work or demand: the router serves them as External metrics through an APIService (`v1beta1.external.metrics.k8s.io`) it registers."},
			"scale_to_zero_after": optS("With `autoscaled`, how long the fleet has no demand before the router takes it to zero (and back for a request); empty: never."),
			"s3_region":           optS("With weights in S3 (the tokenizer paths are s3:// URIs), the bucket's region."),
			"s3_reader_role": optS("With weights in S3, the fleet's reader IAM role (name): the router binds its service account to it with EKS Pod Identity " +
				"(needs `cluster`) to read the tokenizer files, and removes the association on destroy."),
		}}
}

func routerGatewayAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Gateway mode: the router becomes the endpoint picker of a team's own Gateway (Envoy Gateway, kgateway, Istio, GKE, NGINX Gateway Fabric...) " +
			"through the Gateway API Inference Extension (GIE) instead of serving clients itself. Set it (`gateway = {}` takes the defaults) to render an `InferencePool` " +
			"(`inference.networking.k8s.io/v1`) named `name` in the fleet's namespace, over the fleet's pods (`selector.matchLabels` = the fleet's pod labels, " +
			"`targetPorts` = `fleet.http_port`), whose `endpointPickerRef` is the router's Service. The router pods then serve the Endpoint Picker Protocol " +
			"(Envoy ext_proc over gRPC, TLS with a self-signed certificate as GIE's picker serves it) on `port`, follow the fleet's pods through the pool " +
			"(the Role may also get, list and watch `inferencepools`) and are probed over gRPC (`liveness`, `readiness`) on a plaintext health port, 9003, that is not on the Service. " +
			"Their HTTP port keeps only `/healthz`, `/readyz` and `/metrics`: the Service carries it for scraping, beside the picker's port (`appProtocol: http2`), and must stay `ClusterIP`. " +
			"Clients reach the fleet through the gateway, with an HTTPRoute whose `backendRef` is the pool (`group = \"inference.networking.k8s.io\"`, `kind = \"InferencePool\"`); " +
			"authentication is the gateway's job, so `api_key` is refused. The cluster must serve the InferencePool CRD: `llmd_inference_cluster`'s " +
			"`addons.inference_extension` installs it. Unset (default): proxy mode, as before.",
		Attributes: map[string]schema.Attribute{
			"failure_mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("FailClose"),
				Validators: []validator.String{stringvalidator.OneOf("FailClose", "FailOpen")},
				MarkdownDescription: "The pool's `endpointPickerRef.failureMode`: what the gateway does while no router answers. `FailClose` (default, as GIE's API) fails the request; " +
					"`FailOpen` sends it to a pod of the gateway's choosing, without prefix affinity."},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(9002),
				Validators:          []validator.Int64{int64validator.Between(1, 65535)},
				MarkdownDescription: "The picker's gRPC port, on the pods and on the Service (`endpointPickerRef.port`); default `9002`, GIE's."},
			"target_port": schema.Int64Attribute{Optional: true,
				MarkdownDescription: "Pins the pool's `targetPorts`: a plan error when it is not `fleet.http_port`. Unset: the fleet's."},
			"selector": schema.MapAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Pins the pool's `selector.matchLabels`: a plan error when it is not the fleet's pod labels (`fleet.selector`). Unset: the fleet's."},
		}}
}

func routerScoringAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(routerScoringTypes, map[string]attr.Value{
			"preset": types.StringValue("cost-aware"), "scorers": types.ListNull(types.ObjectType{AttrTypes: routerScorerTypes})})),
		MarkdownDescription: "How the router picks a pod: a weighted sum of scorers. Default `preset = \"cost-aware\"`, the router's default " +
			"(prefix 2, cost 2, in-flight 1, rendezvous 1, under a load-bound cap at 1.75x the mean). A change rolls the router pods only.",
		Attributes: map[string]schema.Attribute{
			"preset": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.OneOf(slices.Sorted(maps.Keys(scoringPresets))...)},
				MarkdownDescription: "`cost-aware` (prefix 2, cost 2, in-flight 1, rendezvous 1, load-bound 10 at factor 1.75: every input the router's own " +
					"count, exact at decision time) or `llmd` (llm-d's precise prefix-cache mix: prefix 3, kv-usage 2, queue 2). Give either preset or scorers."},
			"scorers": schema.ListNestedAttribute{Optional: true, Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				MarkdownDescription: "Explicit scorers, validated by the router's own configuration code (types `prefix`, `kv-usage`, `queue`, `in-flight`, `spread`, `rendezvous`, `cost`, `history`, `load-bound`).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"type":   schema.StringAttribute{Required: true, MarkdownDescription: "Scorer type."},
					"weight": schema.Float64Attribute{Required: true, MarkdownDescription: "Weight of its [0, 1] score."},
					"params": schema.MapAttribute{ElementType: types.Float64Type, Optional: true, MarkdownDescription: "The scorer's documented numeric parameters."},
				}}},
		}}
}

func routerLimitsAttribute() schema.SingleNestedAttribute {
	duration := func(def, desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(def),
			Validators: []validator.String{stringvalidator.RegexMatches(durationText, "must be a duration such as 30s")}, MarkdownDescription: desc}
	}
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(routerLimitsTypes, map[string]attr.Value{
			"max_in_flight_per_pod": types.Int64Null(), "max_pending_per_pod": types.Int64Value(2), "max_queue": types.Int64Value(1024),
			"max_pending_prefill_per_pod": types.Int64Value(defaultPendingPrefill), "prefill_reserve": types.Float64Value(defaultPrefillReserve),
			"kv_output_reserve": types.Int64Value(defaultKVOutputReserve), "kv_headroom": types.Float64Value(defaultKVHeadroom),
			"queue_timeout": types.StringValue("30s"), "drain_timeout": types.StringValue("2m"),
			"priority_classes": types.ListNull(types.ObjectType{AttrTypes: routerClassTypes}), "default_class": types.StringNull(),
			"tenant_share": types.Float64Null()})),
		MarkdownDescription: "Admission (flow control) and shutdown. While the pod a request's decision chooses has no room (at its capacity, or with " +
			"`max_pending_per_pod` requests its engine has not started), the request waits in the router, where it can be ordered and shed, instead of inside vLLM, " +
			"and goes to that pod, the one holding its prefix, once it has room. Room goes to the highest priority class with a waiter for the pod and, " +
			"within a class, to its tenants in turn. A request names its class in the `x-llmd-priority` header and its tenant in `x-llmd-tenant`, " +
			"or takes both from its API key (`api_keys`). `/metrics` has `llmd_router_queued_requests`, `llmd_router_queue_wait_seconds` and `llmd_router_shed_total` by class.",
		Attributes: map[string]schema.Attribute{
			"max_in_flight_per_pod": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "Each pod's capacity: the requests all router replicas together keep open on one pod (each replica counts its peers'). " +
					"Unset (default): the fleet's `max_num_seqs` (`fleet.max_num_seqs`, vLLM's batch limit), so requests beyond what a pod runs at once wait in the router; " +
					"`0`: no cap."},
			"max_pending_per_pod": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(2),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "Requests a router replica keeps on one pod that have yet to answer a byte: waiting in vLLM, whose KV cache cannot fit them yet, " +
					"or in their prefill. A pod at the bound takes no more until vLLM starts one, so overload waits in the router, in class order, not in vLLM. " +
					"Default `2`; `0`: no bound (with `max_in_flight_per_pod = 0` too, no queue: requests queue inside vLLM)."},
			"max_pending_prefill_per_pod": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultPendingPrefill),
				Validators: []validator.Int64{int64validator.Between(0, 1<<20)},
				MarkdownDescription: "The prefill bound: while requests of a higher class come (within the last minute), a pod takes no more requests of a lower class " +
					"once the requests there that have yet to answer a byte have this many prompt tokens to compute (the tokens each decision found " +
					"uncached on the pod), counting every router replica's (each replica counts its peers' as they last told it). vLLM computes its running requests' prefill before it starts any waiting request, whatever their priority, so this is about " +
					"how much lower-class prefill a higher class's request can find ahead of it: at twice the fleet's capacity it takes the high class's tail from the " +
					"lower classes' cold prompts, and requests whose prefix the pod holds add few tokens and pass. Set it to the engines' `--max-num-batched-tokens` " +
					"(vLLM's default: `2048` on GPUs under 70 GiB, `8192` on H100s and H200s) so that a pod still computes a full step of prefill. " +
					"Default `2048`; `0` turns it off. The highest class is held only by its own prompts: its request starts on a pod where none of the " +
					"highest-class requests of any router replica has yet to answer a byte, or where it computes no more than an eighth of the bound (a request " +
					"whose prefix the pod holds computes its suffix only), and a prompt no pod holds waits for whichever pod answers first, so that one cold " +
					"prompt never takes the rest of the step that ends another's prefill. `/metrics` has each replica's own share per pod, " +
					"`llmd_router_pod_pending_prefill_tokens`, shown on the router dashboard."},
			"prefill_reserve": schema.Float64Attribute{Optional: true, Computed: true, Default: float64default.StaticFloat64(defaultPrefillReserve),
				Validators: []validator.Float64{float64validator.Between(0, 0.9)},
				MarkdownDescription: "Under the prefill bound, the share of the fleet's pods (rounded down) kept open to the higher classes: a pod open to a " +
					"lower class's request (its unanswered prefill below `max_pending_prefill_per_pod`) takes it only while more pods than that are open. " +
					"In a burst of cold prompts (a fleet starting, a new set of prefixes) the lower classes would otherwise start a step of prefill on every pod " +
					"the moment it opens, and each higher-class request would wait for one wherever it went; with pods held open it starts at once. " +
					"It holds the lower classes only within a minute of a higher class's request, like the bounds. Default `0.25` (2 of 8 pods; " +
					"under 4 pods it keeps none); `0`: none. Without the prefill bound (`max_pending_prefill_per_pod = 0`) it has no effect."},
			"kv_output_reserve": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultKVOutputReserve),
				Validators: []validator.Int64{int64validator.Between(0, 1<<20)},
				MarkdownDescription: "The KV bound: while requests of a higher class come (within the last minute), each lower class may fill only its share of a pod's " +
					"KV cache (its size from vLLM's `vllm:cache_config_info`), counting every request the router replicas have on the pod at its longest (each replica tells the others of its own): its prompt's blocks, " +
					"shared with the requests on the same prefix, and its output up to its `max_tokens` (`max_completion_tokens`, times `n`), or this many tokens when it " +
					"sets none or more; each prompt of a completion batch, which vLLM serves on one engine, counts so. So vLLM does not preempt for the lower classes' growing outputs (and start no waiting request in those steps) and a higher class's " +
					"request starts at once. A lower value packs more of the lower classes' requests into the cache when their outputs end well before `max_tokens`, and " +
					"lets vLLM preempt when they do not. Once a pod's engine has preempted (its `vllm:num_preemptions_total` rose within the last minute), every class, " +
					"the highest and a fleet's only one too, starts there only within the whole cache, counted so: an overloaded pod that preempts recomputes what it " +
					"preempted, loses the cached prefixes to come, and serves fewer requests the more it is sent; held in the router, they start as the running ones end. " +
					"Default `1024`; `0` turns the KV bound off. Until the engine preempts, the highest class is not held by it."},
			"kv_headroom": schema.Float64Attribute{Optional: true, Computed: true, Default: float64default.StaticFloat64(defaultKVHeadroom),
				Validators: []validator.Float64{float64validator.Between(0.01, 0.9)},
				MarkdownDescription: "Under the KV bound, the share of each pod's KV cache the lowest class leaves to the higher ones; the classes between leave a share " +
					"in proportion (with `high`, `standard`, `low`: `standard` fills 95%, `low` 90%). Default `0.1`."},
			"priority_classes": schema.ListNestedAttribute{Optional: true, Validators: []validator.List{listvalidator.SizeBetween(1, 16)},
				MarkdownDescription: "Priority classes, highest first; default `high`, `standard`, `low`, each with `queue_timeout` as its time-to-live.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthBetween(1, 63),
						stringvalidator.RegexMatches(flowName, "must be letters, digits, '-', '_' or '.'")},
						MarkdownDescription: "Class name, as requests give it in `x-llmd-priority`."},
					"ttl": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.RegexMatches(durationText, "must be a duration such as 30s")},
						MarkdownDescription: "How long the class's requests wait for a slot before 503 with `Retry-After`; default `queue_timeout`. " +
							"With a fleet that scales from zero, longer than a pod's start (weights from FSx and vLLM's start-up)."},
				}}},
			"default_class": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Class of a request that names none; default `standard`, or the middle class of `priority_classes`."},
			"tenant_share": schema.Float64Attribute{Optional: true, Validators: []validator.Float64{float64validator.Between(0.01, 1)},
				MarkdownDescription: "Share of `max_queue` one tenant may hold in one class while another tenant waits there; beyond it 429 with `Retry-After`. Default `0.5`."},
			"max_queue": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1024),
				Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "Requests waiting while every pod is at its cap; beyond it 503 with `Retry-After`. Default `1024`."},
			"queue_timeout": duration("30s", "Longest wait for a pod under its cap before 503 with `Retry-After`; default `30s`."),
			"drain_timeout": duration("2m", "On termination, how long open requests and streams may take to finish; default `2m`. The pod's grace period covers it."),
		}}
}

func routerServiceAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(routerServiceTypes, map[string]attr.Value{
			"type": types.StringValue("ClusterIP"), "internal": types.BoolValue(true), "port": types.Int64Value(8000),
			"annotations":                 types.MapValueMust(types.StringType, map[string]attr.Value{}),
			"load_balancer_source_ranges": types.ListValueMust(types.StringType, []attr.Value{})})),
		MarkdownDescription: "The router's Service. A `LoadBalancer` is an AWS Network Load Balancer (billed per hour and per LCU while it exists), internal to the VPC unless `internal = false`.",
		Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ClusterIP"),
				Validators: []validator.String{stringvalidator.OneOf("ClusterIP", "LoadBalancer")}, MarkdownDescription: "`ClusterIP` (default) or `LoadBalancer`."},
			"internal": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "A `LoadBalancer` inside the VPC (default `true`); `false` faces the internet, and then the plan requires `load_balancer_source_ranges` or `api_key`. " +
					"Sets `service.beta.kubernetes.io/aws-load-balancer-internal` (which EKS's built-in controller reads) and `aws-load-balancer-scheme` (the AWS Load Balancer Controller's), with `aws-load-balancer-type = nlb`; `annotations` override them."},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8000),
				Validators: []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "Service port; default `8000`."},
			"annotations": schema.MapAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				Default:             mapdefault.StaticValue(types.MapValueMust(types.StringType, map[string]attr.Value{})),
				MarkdownDescription: "More Service annotations, overriding the defaults above (e.g. `aws-load-balancer-type = external` hands the Service to the AWS Load Balancer Controller)."},
			"load_balancer_source_ranges": schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				Default:             listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})),
				MarkdownDescription: "CIDRs allowed to reach a `LoadBalancer` (enforced in the nodes' security group rules)."},
		}}
}

func routerResourcesAttribute() schema.SingleNestedAttribute {
	opt := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc}
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Per-pod CPU and memory; unset values: cpu `1`, memory `1Gi`, memory_limit `2Gi`. " +
			"Sizing for N pods at R req/s (measured, BENCHMARKS.md 2026-12-02, issue 29): every router pod indexes every pod's KV cache at " +
			"about 50 bytes per cached block, so memory grows by N x (a pod's KV cache blocks) x 50 B: ~64 KB a pod for Qwen2.5-7B on an A10G " +
			"at block size 64 (~1,300 blocks), ~1.4 MB a pod for Llama-3-8B on an H100 80 GB at block size 16 (~28,000 blocks); " +
			"256 such H100 pods add ~0.4 GB; a router pod following 256 pods held ~180 MiB before any cache. " +
			"CPU has a part per pod and a part per request: following each pod and scraping its /metrics every 50 ms costs " +
			"about 1.3 ms of CPU a second (0.32 CPU for 256 pods, idle); each routing decision of a 2,000-token prompt about 0.1 ms, " +
			"the same from 8 to 256 pods, plus about 8 us per streamed token relayed. The Service spreads R over the replicas: " +
			"request cpu = 0.0013 x N + (R / replicas) x 2.2 ms + 0.1 for 256-token replies.",
		Attributes: map[string]schema.Attribute{
			"cpu": opt("CPU request."), "memory": opt("Memory request."), "memory_limit": opt("Memory limit."),
		}}
}

func routerSchedulingAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Where the pods go. Unset: with `cluster`, the cluster's system node group as its `kubernetes` object reports it (`system_node_labels` as node selector, " +
			"`system_node_taints` tolerated), off the GPU nodes; with `kubernetes`, anywhere. Either way the replicas spread over nodes and zones as a preference " +
			"(`ScheduleAnyway`): a replica is never left Pending to keep them apart, and the plan warns when the system node group has one node for more than one replica. " +
			"Each attribute given here replaces its half of the default.",
		Attributes: map[string]schema.Attribute{
			"node_selector": schema.MapAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Node labels the pods require."},
			"tolerations": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Taints tolerated, `key=value:Effect` or `key:Effect`."},
		}}
}
