package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/canary"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// serveCommand is `llmd-router serve`: the routing core (discovery, KV-event
// ingestion, index, scorers) behind the OpenAI-compatible proxy, until ctx
// ends; then it stops accepting, lets open streams finish and exits.
func serveCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseServeFlags(args, stderr, os.Getenv)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := o.routerConfig()
	if err != nil {
		return err
	}
	src, err := source(cfg, o.kubeconfig)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	core, err := newCore(cfg, log)
	if err != nil {
		return err
	}
	defer core.ingestor.Close()
	metrics, err := proxy.NewMetrics(reg)
	if err != nil {
		return err
	}
	lim := o.limits
	lim.Classes = o.classes
	if o.apiKeysFile != "" {
		if lim.APIKeys, err = loadAPIKeys(o.apiKeysFile); err != nil {
			return err
		}
	}
	lim.Fleet, lim.Picker, lim.Prompter, lim.Metrics, lim.Logger = core.fleet, core.picker, core.prompter, metrics, log
	lim.Upstream = cfg.Upstream
	// The router's whole demand: this replica's, and what its peers hold
	// waiting (their in flight is in the fleet's loads already). The peers
	// start below, before anything reads it.
	var ps *peerServer
	demand := func() int64 {
		d := core.server.Demand()
		if ps != nil {
			d += int64(ps.x.PeerWaiting())
		}
		return d
	}
	work := func() int64 {
		w := core.server.Work()
		if ps != nil {
			w += int64(ps.x.PeerWork())
		}
		return w
	}
	auto, err := newAutoscaler(cfg, o.kubeconfig, demand, log)
	if err != nil {
		return err
	}
	lim.Waker = auto.waker()
	srv, err := proxy.New(lim)
	if err != nil {
		return err
	}
	core.server = srv
	for _, c := range []prometheus.Collector{index.Collector{Index: core.index}, kvevents.Collector{Ingestor: core.ingestor},
		discovery.Collector{Fleet: core.fleet}, scoring.Collector{Picker: core.picker}, proxy.Collector{Server: srv},
		prompt.Collector{Chat: core.prompter}} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering core metrics: %w", err)
		}
	}

	runCtx, stopCore := context.WithCancel(context.Background())
	defer stopCore()
	// Peers first: a warm start must fill the index before the fleet
	// follows the pods.
	ps, err = startPeers(runCtx, cfg, core, o.limits.AdminToken, o.kubeconfig, reg, log)
	if err != nil {
		return err
	}
	defer ps.stop()
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- core.fleet.Run(runCtx, src) }()
	if err := startCanary(runCtx, cfg, core, reg, o.canaryInterval, log); err != nil {
		return err
	}

	pf, err := startPicker(o.picker, srv, core.fleet, reg, log)
	if err != nil {
		return err
	}
	if err := auto.start(runCtx, cfg, o.kubeconfig, demand, work, log); err != nil {
		return err
	}
	defer auto.stop()
	var handler http.Handler = srv
	if o.picker.only {
		handler = pickerOnly(srv)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: o.readHeaderTimeout, IdleTimeout: o.idleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving", "listen", ln.Addr().String(), "model", cfg.Model, "pods", len(cfg.Discovery.Static),
		"kubernetes", cfg.Discovery.Kubernetes != nil, "scorers", core.picker.Types())
	// The chosen address on stdout lets scripts and tests use port 0.
	addrs := map[string]string{"listen": ln.Addr().String()}
	if ps != nil {
		addrs["peers"] = ps.ln.Addr().String()
	}
	if auto.ln != nil {
		addrs["metrics_api"] = auto.ln.Addr().String()
	}
	if pf != nil {
		addrs["picker"] = pf.ln.Addr().String()
		if pf.healthLn != nil {
			addrs["picker_health"] = pf.healthLn.Addr().String()
		}
	}
	if err := json.NewEncoder(stdout).Encode(addrs); err != nil {
		return err
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case err := <-pf.done():
		_ = hs.Close()
		return fmt.Errorf("serving the endpoint picker: %w", err)
	case err := <-fleetDone:
		_ = hs.Close()
		return fmt.Errorf("discovery stopped: %w", err)
	case <-ctx.Done():
	}
	// Drain: fail readiness, stop accepting, let open requests and streams
	// finish; the core keeps routing and scraping until they have.
	log.Info("shutting down: draining open requests", "timeout", o.drain.String())
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	pickerDrained := make(chan error, 1)
	go func() { pickerDrained <- pf.drain(sctx) }()
	err = hs.Shutdown(sctx)
	if err != nil {
		_ = hs.Close()
		err = fmt.Errorf("draining: %w", err)
	}
	err = errors.Join(err, <-pickerDrained)
	stopCore()
	if ferr := <-fleetDone; ferr != nil {
		err = errors.Join(err, fmt.Errorf("discovery: %w", ferr))
	}
	log.Info("stopped", "err", err)
	return err
}

// core is the routing core the proxy serves from.
type core struct {
	index    *index.Index
	ingestor *kvevents.Ingestor
	picker   *scoring.Picker
	fleet    *discovery.Fleet
	prompter *prompt.Chat
	// server is set once the proxy exists, before discovery runs.
	server *proxy.Server
}

// newCore assembles index, ingestion, scorers, prompter and fleet from cfg.
func newCore(cfg *config.Config, log *slog.Logger) (*core, error) {
	ws, err := scoring.FromConfig(cfg.Scoring)
	if err != nil {
		return nil, err
	}
	prompter, err := prompt.ChatFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &core{prompter: prompter, index: index.New(index.Config{BlockSize: cfg.BlockSize, MaxKeys: cfg.Index.MaxKeys,
		SpeculationTTL: cfg.Index.SpeculationTTL.Duration})}
	kvlog := log.With("component", "kvevents")
	c.ingestor, err = kvevents.New(kvevents.Config{Index: c.index, Transport: &zmqtransport.Transport{},
		Logf: func(format string, args ...any) { kvlog.Info(fmt.Sprintf(format, args...)) }})
	if err != nil {
		return nil, fmt.Errorf("starting KV-event ingestion: %w", err)
	}
	c.picker = scoring.NewPicker(c.index, ws)
	c.picker.SetDataParallelSize(cfg.Discovery.DataParallelSize)
	c.fleet = discovery.NewFleet(discovery.FleetConfig{Addresses: discovery.Addresses{Discovery: cfg.Discovery, Model: cfg.Model},
		Ingestor: c.ingestor, Metrics: cfg.Metrics, OnRemove: c.forget, SilentAfter: cfg.Discovery.KVEventsSilentAfter.Duration,
		Logger: log.With("component", "discovery")})
	return c, nil
}

// forget drops what the core and the proxy keep about a pod that left.
func (c *core) forget(pod string) {
	c.picker.Forget(pod)
	if c.server != nil {
		c.server.Forget(pod)
	}
}

// kubeClient is a client from kubeconfig (in-cluster when empty), and
// its configuration.
func kubeClient(kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return rc, cs, nil
}

// source is the configured discovery: a static list or a Kubernetes watch.
func source(cfg *config.Config, kubeconfig string) (discovery.Source, error) {
	if k := cfg.Discovery.Kubernetes; k != nil {
		rc, cs, err := kubeClient(kubeconfig)
		if err != nil {
			return nil, err
		}
		if k.InferencePool != "" {
			dyn, err := dynamic.NewForConfig(rc)
			if err != nil {
				return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
			}
			return &discovery.InferencePool{Client: cs, Dynamic: dyn, Namespace: k.Namespace, Name: k.InferencePool}, nil
		}
		return &discovery.Kubernetes{Client: cs, Namespace: k.Namespace, Selector: k.Selector}, nil
	}
	return discovery.FromConfig(cfg.Discovery.Static), nil
}

// startCanary runs the tokenizer parity canary when the model's tokenizer
// and template are configured, and hands it to the prompter, which sends
// the model's requests to a pod's tokenizer while the canary reports a
// mismatch. It must run before the proxy serves: the prompter is not
// modified afterwards.
func startCanary(ctx context.Context, cfg *config.Config, c *core, reg prometheus.Registerer, every time.Duration, log *slog.Logger) error {
	if cfg.Tokenizer.JSON == "" || cfg.Tokenizer.Config == "" {
		return nil
	}
	_, _, m, err := c.prompter.Catalog.Resolve(cfg.Model)
	if err != nil {
		return fmt.Errorf("finding the tokenizer for the canary: %w", err)
	}
	cm, err := canary.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering canary metrics: %w", err)
	}
	g := canary.New(canary.Config{Model: cfg.Model, Local: m, Interval: every, Metrics: cm, Logger: log.With("component", "canary"),
		Pod: func() string {
			for _, p := range c.fleet.Pods(nil) {
				if t, ok := c.fleet.Target(p.Name); ok {
					return t.HTTP
				}
			}
			return ""
		}})
	c.prompter.Guard = g
	go g.Run(ctx)
	return nil
}
