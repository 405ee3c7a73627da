package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Fleet is what the proxy needs of package discovery: the candidates and
// their load, where each serves, the in-flight count the scorers read, and
// whether the first view has arrived. *discovery.Fleet implements it.
type Fleet interface {
	Pods(dst []scoring.Pod) []scoring.Pod
	Target(pod string) (discovery.Pod, bool)
	Begin(pod string, prefillTokens int, top bool) (started, end func())
	Synced() bool
	// ExpectEvents notes a completion sent to pod, which the engine must
	// answer with KV events; Silences lists the pods that did not.
	ExpectEvents(pod string)
	Silences() []discovery.Silence
	// Out lists the pods out of service (left out of Pods); OutSignal
	// is closed when pod goes out, which moves a request waiting there.
	Out() []discovery.Outage
	OutSignal(pod string) <-chan struct{}
}

var _ Fleet = (*discovery.Fleet)(nil)

// Config configures a Server. Zero limits take the defaults below.
type Config struct {
	Fleet    Fleet
	Picker   *scoring.Picker
	Prompter scoring.Prompter
	// Transport sends upstream requests (default: a transport tuned for many
	// concurrent streams to few hosts, see NewTransport).
	Transport http.RoundTripper
	// Metrics receives the serving metrics; nil disables them.
	Metrics *Metrics
	// Logger gets one line per failed attempt and shed request (default
	// slog.Default()).
	Logger *slog.Logger

	// MaxBodyBytes bounds a request body (default 16 MiB: a 128k-token
	// prompt as token ids in JSON).
	MaxBodyBytes int64
	// BodyTimeout bounds reading one request body (default 60s); a slower
	// client gets 408. Header and idle timeouts belong to the http.Server.
	BodyTimeout time.Duration
	// MaxInFlightPerPod is each pod's capacity: the requests every replica
	// of this router together keep open on it (this replica's and the
	// peers' as last exchanged), the engine's max_num_seqs by default
	// (package config); 0 means no cap.
	MaxInFlightPerPod int
	// MaxPendingPerPod bounds the requests this replica sent one pod that
	// have yet to answer a byte: those waiting in the engine, which cannot
	// fit them yet, or in their prefill. A pod at the bound takes no more
	// until the engine starts one, so overload waits in the router's queue,
	// in class order, and not in the engine's. 0 (serve's default) means no
	// bound; llmd_prefix_router renders 2. Either limit set turns the queue
	// on.
	MaxPendingPerPod int
	// MaxPendingPrefillPerPod bounds, for the classes below the highest,
	// the prompt tokens yet to compute of the requests to one pod that have
	// yet to answer a byte (each request's tokens the decision found
	// uncached there), this replica's and its peers' as they last reported
	// them: while they reach it, the pod takes no more
	// lower-class requests until one starts. vLLM computes its running
	// requests' prefill before it starts a waiting one, whatever their
	// priority, so this is how much lower-class prefill a higher class's
	// request may find ahead of it; a request whose prefix the pod holds
	// adds few tokens and passes. It holds a class only within a minute of a
	// higher class's request, here or at a peer, like the KV bound. 0
	// (serve's default) means no bound; llmd_prefix_router renders the
	// engines' --max-num-batched-tokens, one step's tokens.
	MaxPendingPrefillPerPod int
	// PrefillReserve is the share of the fleet's pods, rounded down, that
	// MaxPendingPrefillPerPod keeps open to the higher classes: a pod open
	// to a lower class's request (its unanswered prefill below the bound)
	// takes it only while more pods than that are open. In a burst of cold
	// prompts the lower classes would otherwise start a step of prefill on
	// each pod the moment it opens, and a higher class's request would find
	// one ahead of it on whichever pod it went to. 0 (serve's default)
	// keeps none; llmd_prefix_router renders 0.25 (and nothing when the
	// prefill bound is off). Needs MaxPendingPrefillPerPod.
	PrefillReserve float64
	// EnginePriority sets each routed request's vLLM priority to its
	// class's rank (EngineBody), so that engines run with
	// --scheduling-policy priority put the high class first in their
	// waiting queues and preempt the low class first; MaxPendingPerPod then
	// holds a request behind the unanswered requests of its own class and
	// higher only, since the engine puts it ahead of the lower classes'.
	// Off by default: an FCFS engine ignores the field (vLLM v0.32.0),
	// older releases refuse a non-zero one.
	EnginePriority bool
	// KVOutputReserve, when not 0, turns the KV bound on: the classes below
	// the highest are held to a share of each pod's KV cache (its size from
	// the pod's vllm:cache_config_info), counting every request this
	// replica has on the pod at its longest, its prompt's blocks shared
	// with the requests on the same prefix and its output up to its
	// max_tokens, or KVOutputReserve tokens when it sets none or more. So
	// the engine never preempts for the lower classes' growing outputs and
	// a request of the highest class starts at once. 0 (serve's default)
	// means no KV bound.
	KVOutputReserve int
	// KVHeadroom is the share of each pod's KV cache the lowest class
	// leaves free for the higher ones under the KV bound; the classes
	// between leave a share in proportion (DefaultKVHeadroom when 0).
	KVHeadroom float64
	// MaxQueue bounds the requests waiting for a pod under its cap
	// (default 1024); a full queue sheds its lowest class's newest waiter
	// for a higher class's request, else the newcomer, with 503.
	MaxQueue int
	// QueueTimeout is the time-to-live of a class that sets none (default
	// 30s): a request that waits longer for a slot gets 503.
	QueueTimeout time.Duration
	// Classes are the priority classes, highest first (default
	// DefaultClasses); DefaultClass is the class of a request naming none
	// (default DefaultClass, or the middle class).
	Classes      []Class
	DefaultClass string
	// TenantShare is the share of MaxQueue one tenant may hold in one
	// class (default DefaultTenantShare); beyond it 429.
	TenantShare float64
	// MaxAttempts bounds the pods one request is tried on (default 3).
	MaxAttempts int
	// Upstream holds the timeouts of requests to pods and the per-pod
	// circuit breakers (package config documents each and its default;
	// unset ones take it). Streams and passthrough requests wait
	// ResponseHeaderTimeout for headers, since vLLM sends a stream's before
	// generating; a non-streaming completion's come with its whole answer.
	Upstream config.Upstream
	// APIKey, when set, is required as "Authorization: Bearer <key>" on
	// every /v1 path, as vLLM's --api-key requires it (the pods, started
	// with the same key, check it again).
	APIKey string
	// APIKeys are more accepted keys, each naming its requests' tenant and
	// default class.
	APIKeys []APIKey
	// Waker, when set, scales the fleet from zero: a request that finds no
	// ready pod waits for one, up to its class's time-to-live, instead of
	// getting 503 at once.
	Waker Waker
	// AdminToken, when set, is required as a bearer token on the router's
	// own endpoints that reveal routing state (/v1/route) instead of
	// APIKey.
	AdminToken string
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 16 << 20
	DefaultMaxQueue     = 1024
	DefaultQueueTimeout = 30 * time.Second
	DefaultMaxAttempts  = 3
	DefaultBodyTimeout  = 60 * time.Second
	DefaultKVHeadroom   = 0.1
)

// Server is the HTTP handler of the serving front.
type Server struct {
	cfg   Config
	adm   *admission
	br    *breakers
	mux   *http.ServeMux
	log   *slog.Logger
	drain atomic.Bool
	// waking counts the requests awaitPod holds.
	waking atomic.Int64
	work   workMeter
	// deciding makes each routed decision, from reading the pods' loads
	// to counting the request on its pod, one at a time: two decisions
	// reading the loads at once would both see the same least-loaded pod.
	deciding sync.Mutex

	adminToken   *keyCheck
	keys         []APIKey
	defaultClass int
}

// New returns a Server; Fleet, Picker and Prompter are required.
func New(cfg Config) (*Server, error) {
	if cfg.Fleet == nil || cfg.Picker == nil || cfg.Prompter == nil {
		return nil, errors.New("proxy: Fleet, Picker and Prompter are required")
	}
	if cfg.MaxInFlightPerPod < 0 || cfg.MaxPendingPerPod < 0 || cfg.MaxPendingPrefillPerPod < 0 || cfg.MaxQueue < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxAttempts < 0 || cfg.KVOutputReserve < 0 {
		return nil, fmt.Errorf("proxy: negative limit in %+v", cfg)
	}
	if cfg.KVHeadroom < 0 || cfg.KVHeadroom >= 1 {
		return nil, fmt.Errorf("proxy: KVHeadroom %v: want a share in [0, 1)", cfg.KVHeadroom)
	}
	if cfg.KVHeadroom == 0 {
		cfg.KVHeadroom = DefaultKVHeadroom
	}
	if cfg.PrefillReserve < 0 || cfg.PrefillReserve >= 1 {
		return nil, fmt.Errorf("proxy: PrefillReserve %v: want a share of the pods in [0, 1)", cfg.PrefillReserve)
	}
	if cfg.PrefillReserve > 0 && cfg.MaxPendingPrefillPerPod == 0 {
		return nil, errors.New("proxy: PrefillReserve keeps pods open under the prefill bound, which MaxPendingPrefillPerPod 0 turns off")
	}
	if cfg.Transport == nil {
		cfg.Transport = NewTransport()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	cfg.Upstream.Default()
	s := &Server{cfg: cfg, log: cfg.Logger, br: newBreakers(cfg.Upstream.Breaker), adminToken: newKeyCheck(cfg.AdminToken)}
	if err := s.setupFlow(); err != nil {
		return nil, err
	}
	s.adm = newAdmission(admissionLimits{cap: cfg.MaxInFlightPerPod, pending: cfg.MaxPendingPerPod,
		maxQueue: cfg.MaxQueue, share: s.cfg.TenantShare, byClass: cfg.EnginePriority,
		kv: cfg.KVOutputReserve > 0, kvHeadroom: cfg.KVHeadroom, prefill: cfg.MaxPendingPrefillPerPod,
		reserve: cfg.PrefillReserve}, s.cfg.Classes,
		func() []scoring.Pod { return s.br.filter(s.cfg.Fleet.Pods(nil)) })
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST "+chat.PathCompletions, s.guard(false, s.routed))
	s.mux.HandleFunc("POST "+chat.PathChatCompletions, s.guard(false, s.routed))
	s.mux.HandleFunc("POST /v1/route", s.guard(true, s.explain))
	s.mux.HandleFunc("GET /v1/index", s.guard(true, s.indexDigests))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.mux.HandleFunc("GET /readyz", s.ready)
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics.Handler())
	}
	for path, method := range passthroughPaths {
		s.mux.HandleFunc(method+" "+path, s.guard(false, s.passthrough))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not served by the router", r.Method, r.URL.Path))
	})
	return s, nil
}

// PeerKV implements peers.KV: under the KV bound, a peer replica's request
// on pod counts as this replica's own (its prompts' block keys, one chain
// per prompt, and its own blocks), from sign 1 until sign -1.
func (s *Server) PeerKV(pod string, chains [][]uint64, own, sign int) {
	s.adm.peerKV(pod, chains, own, sign)
}

// PeerClassCame implements peers.KV: a request of the named priority class
// came to a peer replica, which holds the classes below it to their shares
// of the KV cache here too.
func (s *Server) PeerClassCame(class string) { s.adm.peerClassCame(class) }

// ShareKV makes the KV bound tell sh of the demands this replica's
// requests hold, so that the peer replicas count them; call it before
// serving.
func (s *Server) ShareKV(sh KVSharer) { s.adm.shareKV(sh) }

// Forget drops what the server keeps about a pod that left the fleet (its
// circuit breaker); discovery calls it through FleetConfig.OnRemove.
func (s *Server) Forget(pod string) { s.br.forget(pod) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Drain makes /readyz fail from now on, so a load balancer stops sending
// new requests while the http.Server's Shutdown lets open ones finish.
func (s *Server) Drain() { s.drain.Store(true) }

// ready answers /readyz: 200 once discovery has delivered its first view of
// the fleet, 503 before that and while draining. The body lists what is
// wrong but does not stop serving: pods out of service and why, pods
// publishing no KV events (the router still routes on load, blind to their
// caches).
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.drain.Load():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case !s.cfg.Fleet.Synced():
		http.Error(w, "discovery has not synced", http.StatusServiceUnavailable)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ready\n")
		for _, o := range s.cfg.Fleet.Out() {
			_, _ = fmt.Fprintf(w, "warning: %s\n", o)
		}
		for _, sl := range s.cfg.Fleet.Silences() {
			_, _ = fmt.Fprintf(w, "warning: %s\n", sl)
		}
	}
}

// NewTransport returns the upstream transport: keep-alive connections
// enough for hundreds of concurrent streams per pod (Go's default keeps 2
// idle per host, which would redial most requests), a short dial timeout so
// a dead pod fails over quickly, and no compression, so bytes pass through
// as the engine wrote them.
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ExpectContinueTimeout: 0,
	}
}
