package picker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Protocol names (Endpoint Picker Protocol v1.0.0; GIE pkg/lwepp/metadata).
const (
	// DestinationNamespace is the dynamic and filter metadata namespace of
	// the destination and the served endpoint.
	DestinationNamespace = "envoy.lb"
	// DestinationKey names the picked endpoints, as a request header and a
	// metadata key.
	DestinationKey = "x-gateway-destination-endpoint"
	// ServedKey names the endpoint that served, in the response's metadata.
	ServedKey = "x-gateway-destination-endpoint-served"
	// SubsetNamespace and SubsetKey carry the gateway's subset hint: the
	// endpoints the picker may choose from.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	// ChunkBytes bounds one re-sent body chunk: some Envoy builds refuse
	// more than 64 KiB per streamed chunk (llm-d's BodyByteLimit).
	ChunkBytes = 62000
)

// Config configures a Server; Proxy and Fleet are required.
type Config struct {
	// Proxy is the decision path shared with the HTTP front.
	Proxy *proxy.Server
	// Fleet lists the pods for requests that skip scoring.
	Fleet proxy.Fleet
	// Metrics receives the picker's series; nil records nothing.
	Metrics *Metrics
	// Logger gets one line per refused request (default slog.Default()).
	Logger *slog.Logger
	// Fallbacks bounds the next best pods listed after the pick (negative:
	// every other candidate). A gateway whose load balancer takes one
	// address, as Envoy's ORIGINAL_DST cluster does, needs 0.
	Fallbacks int
}

// Server implements envoy.service.ext_proc.v3.ExternalProcessor as an
// endpoint picker.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	cfg Config
	log *slog.Logger
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Proxy == nil || cfg.Fleet == nil {
		return nil, errors.New("picker: Proxy and Fleet are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger}, nil
}

// exchange is one request's state on its stream: Envoy opens a stream per
// HTTP request.
type exchange struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer

	path    string
	flow    proxy.Flow // the class and tenant the request's headers name
	flowErr error      // an unknown class, answered 400 at the decision
	subset  []string   // the hint's endpoints, when hinted
	hinted  bool
	body    []byte
	gotBody bool
	decided bool
	pick    *proxy.Pick
	release func() // frees a passthrough's in-flight count
	began   time.Time
	started bool
	served  bool // the gateway reported the serving endpoint
}

// Process serves one stream: one HTTP request and its response.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	s.cfg.Metrics.streamOpened()
	defer s.cfg.Metrics.streamClosed()
	x := &exchange{s: s, stream: stream}
	defer x.finish()
	for {
		req, err := stream.Recv()
		if err == io.EOF || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return err
		}
		done, err := x.handle(req)
		if err != nil || done {
			return err
		}
	}
}

// handle answers one message; done means the exchange is over (an
// immediate response went out).
func (x *exchange) handle(req *extprocv3.ProcessingRequest) (done bool, err error) {
	x.noteServed(req.GetMetadataContext())
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		x.began = time.Now()
		x.path = pathOf(v.RequestHeaders.GetHeaders())
		// Authentication is the gateway's (api_key is refused in gateway
		// mode), so the headers alone name the flow.
		x.flow, x.flowErr = x.s.cfg.Proxy.Flow(func(name string) string { return headerOf(v.RequestHeaders.GetHeaders(), name) }, nil)
		x.subset, x.hinted = subsetOf(req.GetMetadataContext())
		if v.RequestHeaders.GetEndOfStream() {
			return x.decide()
		}
	case *extprocv3.ProcessingRequest_RequestBody:
		if x.decided {
			return false, status.Error(codes.FailedPrecondition, "request body after the request ended")
		}
		if int64(len(x.body))+int64(len(v.RequestBody.GetBody())) > x.s.cfg.Proxy.MaxBodyBytes() {
			x.s.cfg.Metrics.outcome(outcomeInvalid)
			return true, x.immediate(413, fmt.Sprintf("request body too large: over %d bytes", x.s.cfg.Proxy.MaxBodyBytes()))
		}
		x.gotBody = true
		x.body = append(x.body, v.RequestBody.GetBody()...)
		if v.RequestBody.GetEndOfStream() {
			return x.decide()
		}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		if !x.decided {
			if done, err := x.decide(); done || err != nil {
				return done, err
			}
		}
		return false, x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}})
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return false, x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{}}}})
	case *extprocv3.ProcessingRequest_ResponseBody:
		// The first body byte is the engine's first token: the prefill is
		// done, as the HTTP front marks it.
		if !x.started && (len(v.ResponseBody.GetBody()) > 0 || v.ResponseBody.GetEndOfStream()) {
			x.started = true
			if x.pick != nil {
				x.pick.Started()
			}
		}
		err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: streamed(v.ResponseBody.GetBody(), v.ResponseBody.GetEndOfStream())}}})
		if v.ResponseBody.GetEndOfStream() {
			x.finish()
		}
		return false, err
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		x.finish()
		return false, x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}})
	default:
		return false, status.Errorf(codes.InvalidArgument, "unexpected ext_proc message %T", req.Request)
	}
	return false, nil
}

// decide picks at the end of the request and answers: the destination
// headers and metadata, then the buffered body re-sent in chunks.
func (x *exchange) decide() (bool, error) {
	x.decided = true
	allowed := x.allowed()
	var endpoints []string
	switch x.path {
	case chat.PathCompletions, chat.PathChatCompletions:
		var p *proxy.Pick
		err := x.flowErr
		if err == nil {
			p, err = x.s.cfg.Proxy.Decide(x.stream.Context(), x.path, x.body, allowed, x.flow)
		}
		if err != nil {
			code := proxy.DecisionStatus(err)
			if x.stream.Context().Err() != nil {
				x.s.cfg.Metrics.outcome(outcomeLeft)
				return true, nil // the gateway's client left while queued
			}
			x.s.cfg.Metrics.outcome(outcomeFor(err, code))
			x.s.log.Info("refused", "path", x.path, "code", code, "reason", err)
			return true, x.immediate(code, err.Error())
		}
		x.pick = p
		if x.body, err = x.s.cfg.Proxy.EngineBody(x.body, x.flow); err != nil {
			p.Release()
			x.s.cfg.Metrics.outcome(outcomeInvalid)
			return true, x.immediate(400, err.Error())
		}
		fallbacks := p.Fallbacks
		if n := x.s.cfg.Fallbacks; n >= 0 && n < len(fallbacks) {
			fallbacks = fallbacks[:n]
		}
		for _, pod := range append([]string{p.Pod}, fallbacks...) {
			if e, ok := x.s.cfg.Proxy.Endpoint(pod); ok {
				endpoints = append(endpoints, e)
			}
		}
		if p.Decision.Untokenizable != "" {
			x.s.cfg.Metrics.outcome(outcomeUntokenizable)
		} else {
			x.s.cfg.Metrics.outcome(outcomeRouted)
		}
	default:
		pod, ok := x.leastLoaded(allowed)
		if !ok {
			x.s.cfg.Metrics.outcome(outcomeNoPods)
			return true, x.immediate(503, "no ready pod to route to")
		}
		_, x.release = x.s.cfg.Fleet.Begin(pod, 0, false)
		e, _ := x.s.cfg.Proxy.Endpoint(pod)
		endpoints = []string{e}
		x.s.cfg.Metrics.outcome(outcomePassthrough)
	}
	dest := strings.Join(endpoints, ",")
	set := []*corev3.HeaderValueOption{header(DestinationKey, dest)}
	if x.pick != nil && x.pick.DPRank >= 0 {
		set = append(set, header(proxy.DPRankHeader, strconv.Itoa(x.pick.DPRank)))
	}
	if len(x.body) > 0 {
		// The body is re-sent as a mutation, so Envoy needs its length.
		set = append(set, header("content-length", strconv.Itoa(len(x.body))))
	}
	resp := &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}}}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				DestinationKey: structpb.NewStringValue(dest)}})}},
	}
	if err := x.send(resp); err != nil {
		return false, err
	}
	x.s.cfg.Metrics.decided(time.Since(x.began))
	if !x.gotBody {
		return false, nil // the request ended with its headers
	}
	for off := 0; ; off += ChunkBytes {
		end := min(off+ChunkBytes, len(x.body))
		if err := x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: streamed(x.body[off:end], end == len(x.body))}}}); err != nil {
			return false, err
		}
		if end == len(x.body) {
			break
		}
	}
	x.body = nil
	return false, nil
}

// allowed is the subset hint as a predicate over pod names (nil: no hint).
func (x *exchange) allowed() func(pod string) bool {
	if !x.hinted {
		return nil
	}
	return func(pod string) bool {
		e, ok := x.s.cfg.Proxy.Endpoint(pod)
		if !ok {
			return false
		}
		for _, s := range x.subset {
			if s == e {
				return true
			}
		}
		return false
	}
}

// leastLoaded is the allowed pod with the fewest requests in flight, for
// requests that skip scoring.
func (x *exchange) leastLoaded(allowed func(string) bool) (string, bool) {
	best, found := scoring.Pod{}, false
	for _, p := range x.s.cfg.Fleet.Pods(nil) {
		if allowed != nil && !allowed(p.Name) {
			continue
		}
		if !found || p.Load.InFlight < best.Load.InFlight {
			best, found = p, true
		}
	}
	return best.Name, found
}

// noteServed moves the pick to the endpoint the gateway reports served it.
func (x *exchange) noteServed(md *corev3.Metadata) {
	if x.pick == nil || x.started || x.served {
		return
	}
	ns := md.GetFilterMetadata()[DestinationNamespace]
	v, ok := ns.GetFields()[ServedKey]
	if !ok {
		return
	}
	x.served = true
	x.s.cfg.Metrics.servedReported()
	served := strings.TrimSpace(v.GetStringValue())
	if pod, ok := x.s.cfg.Proxy.PodAt(served); ok && pod != x.pick.Pod {
		x.pick.Served(pod)
		x.s.cfg.Metrics.servedElsewhere()
	}
}

// finish frees what the request holds; it runs at the end of the response
// and again, doing nothing, when the stream closes.
func (x *exchange) finish() {
	if x.pick != nil {
		x.pick.Release()
	}
	if x.release != nil {
		x.release()
		x.release = nil
	}
}

func (x *exchange) send(r *extprocv3.ProcessingResponse) error {
	if err := x.stream.Send(r); err != nil {
		return fmt.Errorf("sending to the gateway: %w", err)
	}
	return nil
}

// immediate answers the client directly with code and vLLM's error body.
func (x *exchange) immediate(code int, msg string) error {
	b := proxy.ErrorBody(code, msg)
	set := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if code == 429 || code == 503 {
		set = append(set, header("retry-after", proxy.RetryAfter))
	}
	return x.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode(code)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set}, Body: b, Details: "llmd-picker: " + msg}}})
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func streamed(b []byte, eos bool) *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: eos}}}}
}

// pathOf is the request's :path without its query.
func pathOf(h *corev3.HeaderMap) string {
	v := headerOf(h, ":path")
	if i := strings.IndexByte(v, '?'); i >= 0 {
		v = v[:i]
	}
	return v
}

// headerOf is the value of h's header name (lower case, as HTTP/2 and
// Envoy carry names), "" when absent.
func headerOf(h *corev3.HeaderMap, name string) string {
	for _, hv := range h.GetHeaders() {
		if hv.GetKey() == name {
			if v := string(hv.GetRawValue()); v != "" {
				return v
			}
			return hv.GetValue()
		}
	}
	return ""
}

// subsetOf reads the gateway's subset hint; hinted is false without one.
func subsetOf(md *corev3.Metadata) (subset []string, hinted bool) {
	ns, ok := md.GetFilterMetadata()[SubsetNamespace]
	if !ok {
		return nil, false
	}
	v, ok := ns.GetFields()[SubsetKey]
	if !ok {
		return nil, false
	}
	subset = []string{}
	for _, e := range v.GetListValue().GetValues() {
		subset = append(subset, strings.TrimSpace(e.GetStringValue()))
	}
	return subset, true
}
