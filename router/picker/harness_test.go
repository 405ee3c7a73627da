package picker

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/chattest"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// The tests of this package run the real picker over the real proxy
// decision path, discovery fleet, picker, index and Qwen tokenizer, behind
// a real gRPC listener (TLS, self-signed), in front of stand-in pods:
// httptest servers answering /metrics with fixed loads and completions as
// vLLM does. The gateway is a stand-in too (standIn below), driving the
// ext_proc stream as Envoy does.

// qwen is the real Qwen3 chat model, loaded once per test process.
var qwen = chattest.Qwen3

// load is a stand-in pod's fixed /metrics answer.
type load struct {
	running, waiting int
	kv               float64
}

// rig is one router with both fronts over one routing core.
type rig struct {
	t      testing.TB
	ix     *index.Index
	picker *scoring.Picker
	fleet  *discovery.Fleet
	proxy  *proxy.Server
	http   *httptest.Server // the HTTP front
	grpc   *grpc.ClientConn // to the picker front
	pods   map[string]*httptest.Server
	now    func() time.Time
	adv    func(time.Duration)
}

// newRig starts pods (name -> fixed load) behind a router with proxy
// limits cfg and scorers (default: config.DefaultScorers); the index's
// clock is the test's (rig.adv).
func newRig(t testing.TB, pods map[string]load, cfg proxy.Config, scorers ...config.Scorer) *rig {
	t.Helper()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	r := &rig{t: t, pods: map[string]*httptest.Server{},
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		adv: func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }}
	cat := chat.NewCatalog()
	cat.AddModel("m", qwen(t))
	if scorers == nil {
		scorers = config.DefaultScorers()
	}
	ws, err := scoring.FromConfig(config.Scoring{Scorers: scorers})
	if err != nil {
		t.Fatal(err)
	}
	r.ix = index.New(index.Config{BlockSize: 16, SpeculationTTL: 2 * time.Second, Now: r.now})
	r.picker = scoring.NewPicker(r.ix, ws)
	r.fleet = discovery.NewFleet(discovery.FleetConfig{Metrics: config.Metrics{
		Interval: config.Duration{Duration: 50 * time.Millisecond}, StaleAfter: config.Duration{Duration: time.Hour},
		Timeout: config.Duration{Duration: time.Second}}})
	var list []discovery.Pod
	for name, l := range pods {
		srv := standInPod(t, name, l)
		r.pods[name] = srv
		list = append(list, discovery.Pod{Name: name, HTTP: srv.URL})
	}
	if err := r.fleet.Update(list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.fleet.Update(nil) })
	waitUntil(t, "every pod scraped", func() bool {
		ps := r.fleet.Pods(nil)
		return !slices.ContainsFunc(ps, func(p scoring.Pod) bool { return !p.Load.Fresh })
	})
	cfg.Fleet, cfg.Picker, cfg.Prompter = r.fleet, r.picker, &prompt.Chat{Catalog: cat}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if r.proxy, err = proxy.New(cfg); err != nil {
		t.Fatal(err)
	}
	r.http = httptest.NewServer(r.proxy)
	t.Cleanup(r.http.Close)

	p, err := New(Config{Proxy: r.proxy, Fleet: r.fleet, Logger: cfg.Logger, Fallbacks: -1})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := TLSConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := p.GRPCServer(tc, r.proxy.Ready)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	// A gateway pointed at a picker with a self-signed certificate skips
	// verification (llm-d's test Envoy: an empty validation_context).
	r.grpc, err = grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // the stand-in gateway, as above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.grpc.Close() })
	return r
}

// standInPod answers /metrics with l and completions with a small JSON
// body naming the pod, as vLLM answers a non-streaming completion.
func standInPod(t testing.TB, name string, l load) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/metrics" {
			_, _ = fmt.Fprintf(w, "vllm:num_requests_running %d\nvllm:num_requests_waiting %d\nvllm:kv_cache_usage_perc %g\n",
				l.running, l.waiting, l.kv)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"text":"%s"}]}`, name)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// endpoint is pod's ip:port as the picker names it.
func (r *rig) endpoint(pod string) string {
	e, ok := r.proxy.Endpoint(pod)
	if !ok {
		r.t.Fatalf("no endpoint for %s", pod)
	}
	return e
}

// store makes pod hold the first blocks of body's prompt in the index, as
// its BlockStored events would.
func (r *rig) store(pod, path, body string, blocks int) {
	r.t.Helper()
	req, err := (&prompt.Chat{Catalog: catalog(r.t)}).Prompt(path, []byte(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if len(req.Tokens) < blocks*16 {
		r.t.Fatalf("prompt of %d tokens has fewer than %d blocks", len(req.Tokens), blocks)
	}
	hashes := make([]uint64, blocks)
	for i := range hashes {
		hashes[i] = uint64(len(pod)*1_000_000 + i + 1)
	}
	if err := r.ix.Store(index.Engine{Pod: pod}, &index.Stored{Hashes: hashes, Tokens: req.Tokens[:blocks*16], BlockSize: 16}); err != nil {
		r.t.Fatal(err)
	}
}

func catalog(t testing.TB) *chat.Catalog {
	cat := chat.NewCatalog()
	cat.AddModel("m", qwen(t))
	return cat
}

// inFlight is pod's count of this router's requests in flight.
func (r *rig) inFlight(pod string) int {
	for _, p := range r.fleet.Pods(nil) {
		if p.Name == pod {
			return p.Load.InFlight
		}
	}
	return -1
}

// explain is the decision the router would take now for body on path.
func (r *rig) explain(path, body string) scoring.Decision {
	r.t.Helper()
	req, err := (&prompt.Chat{Catalog: catalog(r.t)}).Prompt(path, []byte(body))
	if err != nil {
		r.t.Fatal(err)
	}
	d, err := r.picker.Explain(req, r.fleet.Pods(nil))
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// standIn is a stand-in for Envoy's ext_proc filter (envoy
// source/extensions/filters/http/ext_proc, processing_mode
// FULL_DUPLEX_STREAMED for request and response bodies, as llm-d's test
// Envoy configures it in test/testdata/envoy.yaml): one stream per HTTP
// request; request headers without end of stream, then the body in the
// chunks it read from the client, the last with end_of_stream; it waits
// for the header response (or an immediate response), then for the
// streamed body mutations up to end_of_stream; the response's headers and
// body chunks follow, carrying the served endpoint in metadata_context
// envoy.lb, each answered by the processor.
type standIn struct {
	t      testing.TB
	stream extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
	// headers are the client's own request headers, sent after the
	// pseudo-headers and content-type.
	headers map[string]string
}

// open starts one request's stream.
func (r *rig) open() *standIn { return r.openFor(r.t) }

// openFor starts one request's stream reporting to t (a fuzz target's own).
func (r *rig) openFor(t testing.TB) *standIn {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := extprocv3.NewExternalProcessorClient(r.grpc).Process(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return &standIn{t: t, stream: st, cancel: cancel}
}

// picked is what the picker told the gateway for one request.
type picked struct {
	immediate *extprocv3.ImmediateResponse
	header    map[string]string // the header mutation
	metadata  string            // envoy.lb x-gateway-destination-endpoint
	body      []byte            // the re-sent body
	chunks    []int             // the re-sent chunks' sizes
}

// endpoints is the destination list in order.
func (p picked) endpoints() []string { return strings.Split(p.header[DestinationKey], ",") }

// request sends the headers (path, subset hint when subset is not nil) and
// body in chunks of chunk bytes, and reads the picker's answer.
func (s *standIn) request(path string, body []byte, chunk int, subset []string) picked {
	s.t.Helper()
	hdr := &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte(path)},
		{Key: "content-type", RawValue: []byte("application/json")}}}, EndOfStream: body == nil}
	for k, v := range s.headers {
		hdr.Headers.Headers = append(hdr.Headers.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdr}}
	if subset != nil {
		vals := make([]any, len(subset))
		for i, e := range subset {
			vals[i] = e
		}
		hint, err := structpb.NewStruct(map[string]any{SubsetKey: vals})
		if err != nil {
			s.t.Fatal(err)
		}
		msg.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{SubsetNamespace: hint}}
	}
	s.send(msg)
	for off := 0; body != nil; off += chunk {
		end := min(off+chunk, len(body))
		err := s.stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body[off:end], EndOfStream: end == len(body)}}})
		if err == io.EOF {
			break // the picker answered early (an immediate response) and ended the stream
		}
		if err != nil {
			s.t.Fatalf("sending body: %v", err)
		}
		if end == len(body) {
			break
		}
	}
	var p picked
	resp := s.recv()
	if ir := resp.GetImmediateResponse(); ir != nil {
		p.immediate = ir
		return p
	}
	hr := resp.GetRequestHeaders()
	if hr == nil {
		s.t.Fatalf("first answer %T, want request headers", resp.Response)
	}
	p.header = map[string]string{}
	for _, h := range hr.GetResponse().GetHeaderMutation().GetSetHeaders() {
		p.header[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	p.metadata = resp.GetDynamicMetadata().GetFields()[DestinationNamespace].GetStructValue().GetFields()[DestinationKey].GetStringValue()
	if body == nil {
		return p
	}
	for {
		b := s.recv().GetRequestBody()
		sr := b.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			s.t.Fatalf("request body answer without a streamed mutation: %v", b)
		}
		p.body = append(p.body, sr.GetBody()...)
		p.chunks = append(p.chunks, len(sr.GetBody()))
		if sr.GetEndOfStream() {
			return p
		}
	}
}

// respond sends the response's headers and body as the gateway sees them
// from the pod, served naming the endpoint that served ("" for none), and
// reads each answer; it returns the body the picker passed back.
func (s *standIn) respond(served string, chunks ...string) string {
	s.t.Helper()
	var md *corev3.Metadata
	if served != "" {
		lb, err := structpb.NewStruct(map[string]any{ServedKey: served})
		if err != nil {
			s.t.Fatal(err)
		}
		md = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DestinationNamespace: lb}}
	}
	s.send(&extprocv3.ProcessingRequest{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":status", RawValue: []byte("200")}}}}}})
	if s.recv().GetResponseHeaders() == nil {
		s.t.Fatal("no response headers answer")
	}
	var out string
	for i, c := range chunks {
		s.send(&extprocv3.ProcessingRequest{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: []byte(c), EndOfStream: i == len(chunks)-1}}})
		sr := s.recv().GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil || sr.GetEndOfStream() != (i == len(chunks)-1) {
			s.t.Fatalf("response chunk %d answered with %v", i, sr)
		}
		out += string(sr.GetBody())
	}
	return out
}

// close ends the stream as Envoy does after the response.
func (s *standIn) close() {
	_ = s.stream.CloseSend()
	_, _ = s.stream.Recv()
}

func (s *standIn) send(m *extprocv3.ProcessingRequest) {
	s.t.Helper()
	if err := s.stream.Send(m); err != nil {
		s.t.Fatalf("sending %T: %v", m.Request, err)
	}
}

func (s *standIn) recv() *extprocv3.ProcessingResponse {
	s.t.Helper()
	m, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("receiving: %v", err)
	}
	return m
}

// queued is the number of requests waiting for a slot, as /metrics shows.
func (r *rig) queued() float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(proxy.Collector{Server: r.proxy})
	mfs, err := reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "llmd_router_queued_requests" {
			n := 0.0
			for _, m := range mf.GetMetric() {
				n += m.GetGauge().GetValue()
			}
			return n
		}
	}
	r.t.Fatal("no llmd_router_queued_requests")
	return 0
}

func reqHeaders(path string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":method", RawValue: []byte("POST")},
			{Key: ":path", RawValue: []byte(path)}}}}}}
}

func reqBody(b []byte) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: b, EndOfStream: true}}}
}

// servedHeaders are response headers carrying the served endpoint.
func servedHeaders(endpoint string) *extprocv3.ProcessingRequest {
	lb, _ := structpb.NewStruct(map[string]any{ServedKey: endpoint})
	return &extprocv3.ProcessingRequest{
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DestinationNamespace: lb}},
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}
}
