package provider

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

var (
	_ action.ActionWithConfigure      = (*abBenchmarkAction)(nil)
	_ action.ActionWithValidateConfig = (*abBenchmarkAction)(nil)
)

func newABBenchmarkAction() action.Action { return &abBenchmarkAction{} }

// abBenchmarkAction is llmd_ab_benchmark (Terraform 1.14+): the A/B of the
// seed benchmark, run inside the cluster by a Job from the router's image
// (`llmd-router bench` against given endpoints), the fleet's baseline
// Service against the router, its log streamed as the action's progress.
// It changes no managed state: the Job goes when the run ends.
type abBenchmarkAction struct {
	data *providerData
}

// abBenchmarkModel is the action's configuration.
type abBenchmarkModel struct {
	Cluster        types.Object  `tfsdk:"cluster"`
	Kubernetes     types.Object  `tfsdk:"kubernetes"`
	Baseline       types.String  `tfsdk:"baseline"`
	Router         types.String  `tfsdk:"router"`
	NumPrompts     types.Int64   `tfsdk:"num_prompts"`
	NumPrefixes    types.Int64   `tfsdk:"num_prefixes"`
	PrefixLen      types.Int64   `tfsdk:"prefix_len"`
	SuffixLen      types.Int64   `tfsdk:"suffix_len"`
	OutputLen      types.Int64   `tfsdk:"output_len"`
	MaxConcurrency types.Int64   `tfsdk:"max_concurrency"`
	RequestRate    types.Float64 `tfsdk:"request_rate"`
	Seed           types.Int64   `tfsdk:"seed"`
	Timeout        types.String  `tfsdk:"timeout"`
}

// workload is the bench flags the configuration sets, by attribute.
func (m abBenchmarkModel) workload() (map[string]string, error) {
	out := map[string]string{}
	for _, a := range []struct {
		attr, flag string
		v          types.Int64
		min        int64
	}{{"num_prompts", "num-prompts", m.NumPrompts, 1}, {"num_prefixes", "prefix-repetition-num-prefixes", m.NumPrefixes, 1},
		{"prefix_len", "prefix-repetition-prefix-len", m.PrefixLen, 0}, {"suffix_len", "prefix-repetition-suffix-len", m.SuffixLen, 0},
		{"output_len", "prefix-repetition-output-len", m.OutputLen, 1}, {"max_concurrency", "max-concurrency", m.MaxConcurrency, 1},
		{"seed", "seed", m.Seed, 0}} {
		if a.v.IsNull() || a.v.IsUnknown() {
			continue
		}
		if a.v.ValueInt64() < a.min {
			return nil, fmt.Errorf("%s: %d must be at least %d", a.attr, a.v.ValueInt64(), a.min)
		}
		out[a.flag] = strconv.FormatInt(a.v.ValueInt64(), 10)
	}
	if !m.RequestRate.IsNull() && !m.RequestRate.IsUnknown() {
		if r := m.RequestRate.ValueFloat64(); r < 0 {
			return nil, fmt.Errorf("request_rate: %g must be 0 (every request at once) or more", r)
		}
		out["request-rate"] = strconv.FormatFloat(m.RequestRate.ValueFloat64(), 'g', -1, 64)
	}
	return out, nil
}

// defaultABTimeout covers the seed's 9,000 prompts on each side on eight
// A10Gs (BENCHMARK.md: round robin took 840 s, the router 2.3x less: about
// 20 minutes in all) with room for a slower fleet.
const defaultABTimeout = 90 * time.Minute

// endpointWait bounds the wait for a ready pod behind each Service: an A/B
// in the same apply as a rollout (or a restart action) starts while the
// new pods are turning Ready, which is not a reason to fail.
const endpointWait = 5 * time.Minute

func (a *abBenchmarkAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_ab_benchmark"
}

func (a *abBenchmarkAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	count := func(what string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, MarkdownDescription: what + "; default the seed benchmark's."}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Runs the A/B benchmark inside the cluster (Terraform 1.14+): a Job from the router's image runs " +
			"`llmd-router bench` against given endpoints, first round robin over the engines behind the fleet's baseline Service, then " +
			"through the router's pods, each side with prompts of its own so neither finds the other's prefixes cached. The Job runs where " +
			"the router runs (its node selector and tolerations, the fleet's claim for the tokenizer files, the router's API key Secret). " +
			"Its log (each side's progress, then the table, the hit-rate ceiling and the prefill probe) streams as the action's progress. " +
			"It changes no managed state: the Job is deleted when the run ends. The workload is the seed benchmark's (150 prefixes of 2,048 " +
			"tokens, 128-token suffixes, 256 output tokens, 9,000 prompts at concurrency 512) unless set; the engines' caches are not cleared " +
			"between the sides (vLLM offers a production engine no way to), so run it on a fleet serving nothing else.",
		Attributes: map[string]schema.Attribute{
			"cluster": schema.ObjectAttribute{Optional: true, AttributeTypes: kubernetesTypes,
				MarkdownDescription: "The router's cluster, `llmd_inference_cluster.<name>.kubernetes`, as the router takes it."},
			"kubernetes": schema.ObjectAttribute{Optional: true, AttributeTypes: directTypes,
				MarkdownDescription: "A cluster made elsewhere, instead of `cluster`, as the router's `kubernetes` block takes it."},
			"baseline": schema.StringAttribute{Required: true,
				MarkdownDescription: "The fleet's baseline Service, `llmd_model_fleet.<name>.baseline_endpoint`. The bench sends to the engines " +
					"behind it (its ready EndpointSlice addresses, read at the start, after waiting up to 5 minutes for one), round robin as the Service spreads connections, and reads each engine's metrics."},
			"router": schema.StringAttribute{Required: true,
				MarkdownDescription: "The router, `llmd_prefix_router.<name>.url`: the bench sends to the pods behind its Service (read at the start, after waiting up to 5 minutes for one), " +
					"spreading connections over them as the Service does; the Job takes its placement, image and settings from the router's Deployment."},
			"num_prompts":     count("Prompts per side"),
			"num_prefixes":    count("Distinct shared prefixes"),
			"prefix_len":      count("Tokens per shared prefix"),
			"suffix_len":      count("Tokens of each prompt after its prefix"),
			"output_len":      count("Output tokens per request"),
			"max_concurrency": count("Requests in flight at most"),
			"request_rate": schema.Float64Attribute{Optional: true,
				MarkdownDescription: "Poisson arrivals per second; default 0, every request ready at once (bounded by `max_concurrency`), as the seed's."},
			"seed": count("Seed of the prompts"),
			"timeout": schema.StringAttribute{Optional: true,
				MarkdownDescription: "How long the run may take, a Go duration; default `90m`. It bounds the Job too (`activeDeadlineSeconds`)."},
		},
	}
}

func (a *abBenchmarkAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (a *abBenchmarkAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	var m abBenchmarkModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	validateActionConnection(m.Cluster, m.Kubernetes, &resp.Diagnostics)
	for _, e := range []struct {
		attr string
		v    types.String
	}{{"baseline", m.Baseline}, {"router", m.Router}} {
		if e.v.IsNull() || e.v.IsUnknown() {
			continue
		}
		if _, err := inClusterService(e.attr, e.v.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root(e.attr), "Invalid endpoint", err.Error())
		}
	}
	if _, err := m.workload(); err != nil {
		resp.Diagnostics.AddError("Invalid workload", err.Error())
	}
	if _, err := durationOr(m.Timeout, defaultABTimeout); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("timeout"), "Invalid timeout", err.Error())
	}
}

// serviceRef is a Service named by its in-cluster URL.
type serviceRef struct {
	Namespace, Name string
	Port            int32
}

// inClusterService reads http://<service>.<namespace>.svc[.<cluster domain>][:port],
// the form of the fleet's baseline_endpoint and the router's url.
func inClusterService(attr, raw string) (serviceRef, error) {
	bad := func(why string) (serviceRef, error) {
		return serviceRef{}, fmt.Errorf("%s: %q %s; want an in-cluster URL http://<service>.<namespace>.svc.cluster.local:<port>, as "+
			"llmd_model_fleet.<name>.baseline_endpoint and llmd_prefix_router.<name>.url give it", attr, raw, why)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return bad("is not an http:// URL")
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) < 3 || labels[2] != "svc" {
		return bad("names no Service")
	}
	port := int64(80)
	if p := u.Port(); p != "" {
		if port, err = strconv.ParseInt(p, 10, 32); err != nil {
			return bad("has no valid port")
		}
	}
	return serviceRef{Namespace: labels[1], Name: labels[0], Port: int32(port)}, nil
}

// durationOr parses v as a positive Go duration; def when unset.
func durationOr(v types.String, def time.Duration) (time.Duration, error) {
	if v.IsNull() || v.IsUnknown() {
		return def, nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout: %q must be a positive Go duration, e.g. \"45m\"", v.ValueString())
	}
	return d, nil
}

func (a *abBenchmarkAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m abBenchmarkModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	fail := func(err error) { resp.Diagnostics.AddError("Running the A/B benchmark", err.Error()) }
	progress := func(_ context.Context, msg string, _ map[string]any) {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
	timeout, err := durationOr(m.Timeout, defaultABTimeout)
	if err != nil {
		fail(err)
		return
	}
	conn, err := decodeConnection(ctx, m.Cluster, m.Kubernetes)
	if err != nil {
		fail(err)
		return
	}
	c, err := conn.client(ctx, a.data)
	if err != nil {
		fail(err)
		return
	}
	c.Log = progress
	b, err := planBenchmark(ctx, c, m)
	if err != nil {
		fail(err)
		return
	}
	b.DeadlineSeconds = int64(timeout.Seconds())
	progress(ctx, fmt.Sprintf("A/B: %d engines behind %s, %d router pods behind %s", len(b.Engines), m.Baseline.ValueString(),
		len(b.Routers), m.Router.ValueString()), nil)
	if err := runBenchmark(ctx, c, b, timeout, progress); err != nil {
		fail(err)
	}
}

// planBenchmark reads what the Job needs from the cluster: the router's
// Deployment and configuration, and both Services' ready endpoints.
func planBenchmark(ctx context.Context, c *kube.Client, m abBenchmarkModel) (workloads.Benchmark, error) {
	routerSvc, err := inClusterService("router", m.Router.ValueString())
	if err != nil {
		return workloads.Benchmark{}, err
	}
	baseline, err := inClusterService("baseline", m.Baseline.ValueString())
	if err != nil {
		return workloads.Benchmark{}, err
	}
	flags, err := m.workload()
	if err != nil {
		return workloads.Benchmark{}, err
	}
	ref := routerSvc.Namespace + "/" + routerSvc.Name
	dep, err := c.Typed.AppsV1().Deployments(routerSvc.Namespace).Get(ctx, routerSvc.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return workloads.Benchmark{}, fmt.Errorf("router: no Deployment %s in the cluster (pass llmd_prefix_router.<name>.url)", ref)
	}
	if err != nil {
		return workloads.Benchmark{}, fmt.Errorf("reading the router's Deployment %s: %w", ref, err)
	}
	if _, err := importedSettings(dep, routerSettingsAnnotation, "llmd_prefix_router"); err != nil {
		return workloads.Benchmark{}, fmt.Errorf("router: %w", err)
	}
	pod := dep.Spec.Template.Spec
	b := workloads.Benchmark{Name: routerSvc.Name + "-ab", Namespace: routerSvc.Namespace, Router: routerSvc.Name,
		Image: pod.Containers[0].Image, NodeSelector: pod.NodeSelector, Tolerations: pod.Tolerations, Workload: flags}
	for _, e := range pod.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Name == "LLMD_API_KEY" {
			b.APIKey = e.ValueFrom.SecretKeyRef
		}
	}
	configMap := ""
	for _, v := range pod.Volumes {
		switch {
		case v.ConfigMap != nil:
			configMap = v.ConfigMap.Name
		case v.PersistentVolumeClaim != nil:
			b.Claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	cfg, err := routerConfig(ctx, c, routerSvc.Namespace, configMap)
	if err != nil {
		return workloads.Benchmark{}, err
	}
	if cfg.Discovery.Kubernetes != nil && cfg.Discovery.Kubernetes.InferencePool != "" {
		return workloads.Benchmark{}, fmt.Errorf("router: %s runs in gateway mode (an endpoint picker): measure through the gateway instead", ref)
	}
	b.Model, b.BlockSize, b.TokenizerJSON, b.TokenizerConfig = cfg.Model, cfg.BlockSize, cfg.Tokenizer.JSON, cfg.Tokenizer.Config
	for _, side := range []struct {
		svc serviceRef
		out *[]string
	}{{baseline, &b.Engines}, {routerSvc, &b.Routers}} {
		addrs, err := c.WaitServiceEndpoints(ctx, side.svc.Namespace, side.svc.Name, side.svc.Port, endpointWait)
		if err != nil {
			return workloads.Benchmark{}, err
		}
		for _, hp := range addrs {
			*side.out = append(*side.out, "http://"+hp)
		}
	}
	return b, nil
}

// routerConfig is the router's configuration file from its ConfigMap.
func routerConfig(ctx context.Context, c *kube.Client, namespace, name string) (*config.Config, error) {
	cm, err := c.Typed.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the router's ConfigMap %s/%s: %w", namespace, name, err)
	}
	raw, ok := cm.Data[workloads.RouterConfigFile]
	if !ok {
		return nil, fmt.Errorf("the router's ConfigMap %s/%s has no %s", namespace, name, workloads.RouterConfigFile)
	}
	return config.Parse([]byte(raw))
}

// runBenchmark runs b's Job, streams its log through progress, and deletes
// it at the end, whatever the end. A Job of the same name still running
// (another A/B on this router) is an error; a finished one is replaced.
func runBenchmark(ctx context.Context, c *kube.Client, b workloads.Benchmark, timeout time.Duration, progress kube.Logger) error {
	job, err := b.Job()
	if err != nil {
		return err
	}
	jobs := c.Typed.BatchV1().Jobs(b.Namespace)
	ref := kube.Ref{Group: "batch", Version: "v1", Kind: "Job", Namespace: b.Namespace, Name: b.Name}
	if old, err := jobs.Get(ctx, b.Name, metav1.GetOptions{}); err == nil {
		if old.Status.CompletionTime == nil && old.Status.Failed == 0 {
			return fmt.Errorf("Job %s/%s is running: another A/B on this router; wait for it or delete the Job", b.Namespace, b.Name)
		}
		if err := c.Delete(ctx, []kube.Ref{ref}); err != nil {
			return err
		}
	}
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: "llmd-ab-benchmark"}); err != nil {
		return fmt.Errorf("creating Job %s/%s: %w", b.Namespace, b.Name, err)
	}
	defer func() {
		// The run is over, the action's context perhaps with it: the Job still goes.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := c.Delete(cleanup, []kube.Ref{ref}); err != nil {
			progress(ctx, "could not delete the A/B Job: "+err.Error(), nil)
		}
	}()
	run, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	followed := make(chan error, 1)
	go func() { followed <- followJobLog(run, c, b, progress) }()
	waitErr := c.WaitJob(run, b.Namespace, b.Name)
	// The log ends with the pod; a Job that never ran a pod has none.
	select {
	case err := <-followed:
		if err != nil && waitErr == nil {
			return fmt.Errorf("reading the A/B Job's log: %w", err)
		}
	case <-time.After(30 * time.Second):
	}
	if waitErr != nil {
		return fmt.Errorf("%s", explain(waitErr))
	}
	return nil
}

// followJobLog waits for the Job's pod and streams its bench container's
// log lines through progress.
func followJobLog(ctx context.Context, c *kube.Client, b workloads.Benchmark, progress kube.Logger) error {
	for {
		pods, err := c.Typed.CoreV1().Pods(b.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + b.Name})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return c.FollowLogs(ctx, b.Namespace, pods.Items[0].Name, "bench", func(line string) { progress(ctx, line, nil) })
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.Poll):
		}
	}
}
