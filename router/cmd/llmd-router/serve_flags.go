package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// serveOptions are `llmd-router serve`'s settings besides the config file.
type serveOptions struct {
	configPath, listen, model, tokJSON, tokConfig, kubeconfig string
	loraAdapters                                              string
	blockSize, dataParallel                                   int
	podsFile                                                  string
	peersListen, peers                                        string
	apiKeysFile                                               string
	classes                                                   classesFlag

	limits                                proxy.Config
	picker                                pickerOptions
	readHeaderTimeout, idleTimeout, drain time.Duration
	canaryInterval                        time.Duration
	logLevel                              string
	set                                   map[string]bool // flags given on the command line or in the environment
}

// envPrefix turns a flag name into its environment variable: --max-queue is
// LLMD_MAX_QUEUE.
const envPrefix = "LLMD_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseServeFlags reads flags, then fills every flag not given from its
// LLMD_* environment variable: flags beat the environment, which beats the
// config file, which beats the defaults.
func parseServeFlags(args []string, stderr io.Writer, getenv func(string) string) (*serveOptions, error) {
	o := &serveOptions{set: make(map[string]bool)}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "router YAML config (package router/config); flags and LLMD_* variables override it")
	fs.StringVar(&o.listen, "listen", config.DefaultListen, "address to serve on (port 0 picks one; the chosen address is printed as JSON on stdout)")
	fs.StringVar(&o.model, "model", "Qwen/Qwen2.5-7B-Instruct", "served model name (the simulator's default)")
	fs.StringVar(&o.loraAdapters, "lora-adapters", "", "comma-separated LoRA adapter names served on top of --model (vLLM's --lora-modules names)")
	fs.StringVar(&o.tokJSON, "tokenizer", "", "the model's tokenizer.json, a path or an s3://bucket/key URI; without it requests route on load alone")
	fs.StringVar(&o.tokConfig, "tokenizer-config", "", "the model's tokenizer_config.json (chat template), a path or an s3://bucket/key URI")
	fs.IntVar(&o.blockSize, "block-size", 0, "vLLM --block-size (0 learns it from KV events)")
	fs.IntVar(&o.dataParallel, "data-parallel-size", 0, "every pod's vLLM --data-parallel-size (0 or 1: none; rank r publishes KV events on the ports + r)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for Kubernetes discovery (default: in-cluster)")
	fs.StringVar(&o.podsFile, "pods-file", "", "static pods from a file of the JSON lines `llmd-router sim` prints (any --port)")
	fs.StringVar(&o.peersListen, "peers-listen", "", "serve the other router replicas (gRPC) on this address, e.g. :9092, sharing this replica's decisions with them (peers.listen)")
	fs.StringVar(&o.peers, "peers", "", "comma-separated host:port of the other replicas' --peers-listen (peers.static; this replica's own may be among them)")
	fs.Int64Var(&o.limits.MaxBodyBytes, "max-body-bytes", proxy.DefaultMaxBodyBytes, "largest request body; larger gets 413")
	fs.IntVar(&o.limits.MaxInFlightPerPod, "max-in-flight-per-pod", 0, "requests this router keeps open on one pod (0: no cap)")
	fs.IntVar(&o.limits.MaxPendingPerPod, "max-pending-per-pod", 0, "requests this router keeps on one pod that have yet to answer a byte (waiting in the engine or in their prefill); at the bound the pod takes no more until one starts (0: no bound)")
	fs.IntVar(&o.limits.MaxPendingPrefillPerPod, "max-pending-prefill-per-pod", 0, "for the classes below the highest, within a minute of a higher class's request: the uncached prompt tokens of the requests on one pod yet to answer a byte, this router's and its peers' as they last reported them, at which the pod takes no more of them until one starts, so a higher class's request finds at most about that much prefill ahead of it in the engine (0: no bound; the engines' --max-num-batched-tokens is one step's)")
	fs.Float64Var(&o.limits.PrefillReserve, "prefill-reserve", 0, "share of the fleet's pods, rounded down, that --max-pending-prefill-per-pod keeps open to the higher classes: a lower class's request takes a pod only while more pods than that have less than the bound's prefill unanswered (0: none; needs --max-pending-prefill-per-pod)")
	fs.BoolVar(&o.limits.EnginePriority, "engine-priority", false, "set each request's vLLM priority to its class's rank (0 the highest), overriding the client's, for engines run with --scheduling-policy priority; --max-pending-per-pod then counts a request's own class and higher only")
	fs.IntVar(&o.limits.KVOutputReserve, "kv-output-reserve", 0, "turn the KV bound on: the classes below the highest are held to a share of each pod's KV cache (vllm:cache_config_info), and every class to the whole cache within a minute of the pod's engine preempting (vllm:num_preemptions_total), counting each request at its longest, its output up to its max_tokens or this many tokens when it sets none or more (0: no KV bound)")
	fs.Float64Var(&o.limits.KVHeadroom, "kv-headroom", proxy.DefaultKVHeadroom, "share of each pod's KV cache the lowest class leaves to the higher ones under --kv-output-reserve (the classes between leave a share in proportion)")
	fs.IntVar(&o.limits.MaxQueue, "max-queue", proxy.DefaultMaxQueue, "requests waiting while every pod is at its cap; when full, the lowest class's newest waiter (or the newcomer) gets 503")
	fs.DurationVar(&o.limits.QueueTimeout, "queue-timeout", proxy.DefaultQueueTimeout, "time-to-live of a class --priority-classes gives none: the longest wait for a pod under its cap before 503")
	fs.Var(&o.classes, "priority-classes", "priority classes, highest first, each NAME or NAME=TTL, e.g. high=60s,standard,low=10s (default high,standard,low); requests name one in the x-llmd-priority header")
	fs.StringVar(&o.limits.DefaultClass, "default-class", "", "class of a request naming none (default standard, else the middle class)")
	fs.Float64Var(&o.limits.TenantShare, "tenant-share", proxy.DefaultTenantShare, "share of --max-queue one tenant (x-llmd-tenant, or its API key's) may hold in one class; beyond it 429")
	fs.StringVar(&o.apiKeysFile, "api-keys-file", "", "more accepted API keys, one a line: the key's SHA-256 in hex, then optional tenant=NAME and class=NAME (the highest class its requests may take)")
	fs.IntVar(&o.limits.MaxAttempts, "max-attempts", proxy.DefaultMaxAttempts, "pods one request is tried on")

	fs.StringVar(&o.limits.APIKey, "api-key", "", "require \"Authorization: Bearer KEY\" on /v1 paths, as vLLM's --api-key does (prefer LLMD_API_KEY: flags show in ps)")
	fs.StringVar(&o.limits.AdminToken, "admin-token", "", "bearer token /v1/route requires instead of the API key (prefer LLMD_ADMIN_TOKEN)")
	fs.DurationVar(&o.limits.BodyTimeout, "body-timeout", proxy.DefaultBodyTimeout, "longest read of one request body; slower gets 408")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 10*time.Second, "longest read of a request's headers")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 120*time.Second, "keep-alive connections idle longer are closed")
	fs.DurationVar(&o.drain, "shutdown-timeout", 5*time.Minute, "on SIGTERM, how long open requests (streams) may take to finish")
	fs.DurationVar(&o.canaryInterval, "canary-interval", 5*time.Minute, "tokenizer canary period (with --tokenizer-config)")
	fs.StringVar(&o.picker.listen, "picker-listen", "", "also serve as a Gateway API Inference Extension endpoint picker (Envoy ext_proc over gRPC) on this address, e.g. :9002")
	fs.BoolVar(&o.picker.only, "picker-only", false, "serve clients only through the gateway: the HTTP listener keeps /healthz, /readyz and /metrics")
	fs.StringVar(&o.picker.certFile, "picker-cert", "", "TLS certificate (PEM) of the picker's listener; without it and --picker-key, a self-signed one")
	fs.StringVar(&o.picker.keyFile, "picker-key", "", "TLS key (PEM) of --picker-cert")
	fs.StringVar(&o.picker.healthListen, "picker-health-listen", "", "also serve the picker's gRPC health services (liveness, readiness, ext_proc) in plaintext on this address, e.g. :9003, for Kubernetes gRPC probes (which speak no TLS)")
	fs.BoolVar(&o.picker.plaintext, "picker-plaintext", false, "serve the picker without TLS")
	fs.IntVar(&o.picker.fallbacks, "picker-fallbacks", -1, "next best pods listed after the pick for the gateway to retry (-1: every candidate; 0 for a gateway that takes one address, as Envoy's ORIGINAL_DST cluster does)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (debug logs every request)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if o.set[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
			o.set[f.Name] = true
		}
	})
	return o, errors.Join(errs...)
}

// routerConfig is the config file with the options applied over it; without
// a file, the options alone must name the pods.
func (o *serveOptions) routerConfig() (*config.Config, error) {
	c := &config.Config{}
	if o.configPath != "" {
		data, err := os.ReadFile(o.configPath)
		if err != nil {
			return nil, fmt.Errorf("reading router config: %w", err)
		}
		if c, err = config.Parse(data); err != nil {
			return nil, fmt.Errorf("router config %s: %w", o.configPath, err)
		}
	}
	override := func(name string, apply func()) {
		if o.set[name] || o.configPath == "" {
			apply()
		}
	}
	override("listen", func() { c.Listen = o.listen })
	override("model", func() { c.Model = o.model })
	override("lora-adapters", func() {
		c.LoRAAdapters = strings.FieldsFunc(o.loraAdapters, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	})
	override("tokenizer", func() { c.Tokenizer.JSON = o.tokJSON })
	override("tokenizer-config", func() { c.Tokenizer.Config = o.tokConfig })
	override("block-size", func() { c.BlockSize = o.blockSize })
	override("data-parallel-size", func() { c.Discovery.DataParallelSize = o.dataParallel })
	override("peers-listen", func() { c.Peers.Listen = o.peersListen })
	if o.set["peers"] {
		c.Peers.Kubernetes = nil
		c.Peers.Static = strings.FieldsFunc(o.peers, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
	if o.podsFile != "" {
		static, err := readPodsFile(o.podsFile)
		if err != nil {
			return nil, err
		}
		c.Discovery.Kubernetes = nil
		c.Discovery.Static = static
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	return c, nil
}

// readPodsFile reads the replica lines `llmd-router sim` prints.
func readPodsFile(path string) ([]config.StaticPod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading pods file: %w", err)
	}
	defer f.Close()
	var out []config.StaticPod
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var p struct{ Pod, HTTP, KV, Replay string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("pods file %s line %d: %w", path, line, err)
		}
		out = append(out, config.StaticPod{Name: p.Pod, HTTP: p.HTTP, KVEvents: p.KV, Replay: p.Replay})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading pods file %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pods file %s lists no pods", path)
	}
	return out, nil
}
