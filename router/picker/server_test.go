package picker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// completion is a completion request body whose prompt repeats text n
// times.
func completion(text string, n int) string {
	return `{"model":"m","prompt":"` + strings.Repeat(text, n) + `"}`
}

var idle = load{}

// TestSameDecisionOnBothFronts is the front-independence property (design
// decision 15): one router whose index and loads are fixed answers one
// request on each front, and both choose the pod its scoring prefers;
// the first request's speculation has expired (the index's clock is the
// test's) and its in-flight count returned before the second is asked,
// so nothing the first front did steers the second.
func TestSameDecisionOnBothFronts(t *testing.T) {
	for _, tc := range []struct {
		order   string
		scorers []config.Scorer
	}{{"http-then-grpc", config.DefaultScorers()}, {"grpc-then-http", config.DefaultScorers()},
		{"http-then-grpc/llmd-scorers", config.LLMDScorers()}, {"grpc-then-http/llmd-scorers", config.LLMDScorers()}} {
		order := tc.order
		t.Run(order, func(t *testing.T) {
			// "warm" holds the prompt's prefix but is busier; the scorers
			// weigh both, and the test asserts only that the fronts agree
			// with each other and with Explain on the fixed state.
			r := newRig(t, map[string]load{"warm": {running: 3, waiting: 1, kv: 0.5}, "cold": {running: 1, kv: 0.1},
				"other": {running: 2, waiting: 2, kv: 0.7}}, proxy.Config{}, tc.scorers...)
			body := completion("the lighthouse keeper counts the ships at night ", 20)
			r.store("warm", chat.PathCompletions, body, 6)
			want := r.explain(chat.PathCompletions, body)

			viaHTTP := func() string {
				resp, err := http.Post(r.http.URL+chat.PathCompletions, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("HTTP front: %d", resp.StatusCode)
				}
				return resp.Header.Get(proxy.PodHeader)
			}
			viaGRPC := func() string {
				s := r.open()
				p := s.request(chat.PathCompletions, []byte(body), 1<<14, nil)
				if p.immediate != nil {
					t.Fatalf("picker refused: %v", p.immediate)
				}
				pod, ok := r.proxy.PodAt(p.endpoints()[0])
				if !ok {
					t.Fatalf("picked endpoint %s is no pod", p.endpoints()[0])
				}
				s.respond(p.endpoints()[0], `{"choices":[]}`)
				s.close()
				return pod
			}
			fronts := []func() string{viaHTTP, viaGRPC}
			if strings.HasPrefix(order, "grpc") {
				fronts[0], fronts[1] = fronts[1], fronts[0]
			}
			first := fronts[0]()
			if first != want.Pod {
				t.Fatalf("first front chose %s, Explain on the fixed state %s:\n%v", first, want.Pod, want)
			}
			waitUntil(t, "the first request to leave the pod's count", func() bool { return r.inFlight(first) == 0 })
			// The first request's speculation stands until its TTL passes.
			if d := r.explain(chat.PathCompletions, body); hitOn(d, first).Speculative == 0 {
				t.Fatalf("no speculation from the first request on %s: %v", first, d)
			}
			r.adv(time.Minute)
			if d := r.explain(chat.PathCompletions, body); d.String() != want.String() {
				t.Fatalf("state after the first request differs from before:\nbefore %v\nafter %v", want, d)
			}
			if second := fronts[1](); second != first {
				t.Fatalf("the fronts disagree: %s then %s, for one request on one fixed state", first, second)
			}
		})
	}
}

// hitOn is pod's prefix hit in d.
func hitOn(d scoring.Decision, pod string) scoring.Hit {
	for _, sc := range d.Scores {
		if sc.Pod == pod {
			return sc.Hit
		}
	}
	return scoring.Hit{}
}

// TestBodyInChunksIsReSentInChunksOf62000: Envoy streams the body in the
// chunks it read; the picker buffers to end of stream, answers the
// destination with the body's length, and re-sends it in chunks of at most
// 62,000 bytes (llm-d's BodyByteLimit) with end_of_stream on the last.
func TestBodyInChunksIsReSentInChunksOf62000(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle, "b": idle}, proxy.Config{})
	body := []byte(completion("a long shared system prompt about lighthouses and their keepers ", 2500)) // ~160 KB
	s := r.open()
	p := s.request(chat.PathCompletions, body, 16<<10, nil)
	if p.immediate != nil {
		t.Fatalf("refused: %v", p.immediate)
	}
	if !bytes.Equal(p.body, body) {
		t.Fatalf("re-sent body of %d bytes differs from the %d sent", len(p.body), len(body))
	}
	for i, n := range p.chunks {
		if n > ChunkBytes || (i < len(p.chunks)-1 && n != ChunkBytes) {
			t.Fatalf("re-sent chunks %v, want full 62000-byte chunks then the rest", p.chunks)
		}
	}
	if len(p.chunks) != (len(body)+ChunkBytes-1)/ChunkBytes {
		t.Fatalf("re-sent chunks %v for %d bytes", p.chunks, len(body))
	}
	if p.header["content-length"] != itoa(len(body)) {
		t.Fatalf("content-length %q, want %d", p.header["content-length"], len(body))
	}
	if p.header[DestinationKey] != p.metadata {
		t.Fatalf("header %q and metadata %q must name the same endpoints", p.header[DestinationKey], p.metadata)
	}
	if got := p.endpoints(); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("destination %v, want the pick and the other pod as fallback", got)
	}
	if got := s.respond(p.endpoints()[0], "part one, ", "part two"); got != "part one, part two" {
		t.Fatalf("response body passed back as %q", got)
	}
	s.close()
}

// TestEnginePriorityInTheReSentBody: with EnginePriority on, the body the
// picker re-sends to the gateway carries the request's class rank as vLLM's
// priority, overriding the client's, as the HTTP front sends it; the
// content-length follows the new body.
func TestEnginePriorityInTheReSentBody(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{EnginePriority: true})
	body := []byte(`{"model":"m","prompt":"hello","max_tokens":1,"priority":-50}`)
	for class, want := range map[string]float64{"high": 0, "": 1, "low": 2} {
		s := r.open()
		if class != "" {
			s.headers = map[string]string{proxy.PriorityHeader: class}
		}
		p := s.request(chat.PathCompletions, body, 1<<14, nil)
		if p.immediate != nil {
			t.Fatalf("class %q refused: %v", class, p.immediate)
		}
		var m map[string]any
		if err := json.Unmarshal(p.body, &m); err != nil || m["priority"] != want || m["prompt"] != "hello" {
			t.Errorf("class %q: re-sent body %s (%v), want priority %v", class, p.body, err, want)
		}
		if p.header["content-length"] != itoa(len(p.body)) {
			t.Errorf("class %q: content-length %q for a body of %d bytes", class, p.header["content-length"], len(p.body))
		}
		s.respond(r.endpoint("a"), "{}")
		s.close()
	}
}

// TestRequestEndingWithHeaders: a request without a body (a model list)
// ends with its headers; the picker answers the destination, the pod with
// the fewest requests in flight, and sends no body.
func TestRequestEndingWithHeaders(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{})
	s := r.open()
	p := s.request("/v1/models", nil, 0, nil)
	if p.immediate != nil || p.header[DestinationKey] != r.endpoint("a") {
		t.Fatalf("got %+v, want a's endpoint", p)
	}
	if r.inFlight("a") != 1 {
		t.Fatalf("in flight on a: %d, want 1 until the response ends", r.inFlight("a"))
	}
	s.respond("", `{"data":[]}`)
	waitUntil(t, "the model list to leave a's count", func() bool { return r.inFlight("a") == 0 })
	s.close()
}

// TestSubsetHintRestrictsTheChoice: with the gateway's subset naming only
// "cold", the picker chooses it although "warm" holds the prefix, and
// offers no fallback outside the subset.
func TestSubsetHintRestrictsTheChoice(t *testing.T) {
	r := newRig(t, map[string]load{"warm": idle, "cold": idle}, proxy.Config{})
	body := completion("the lighthouse keeper counts the ships at night ", 20)
	r.store("warm", chat.PathCompletions, body, 6)
	if d := r.explain(chat.PathCompletions, body); d.Pod != "warm" {
		t.Fatalf("without a hint the router prefers %s, the test needs warm", d.Pod)
	}
	s := r.open()
	p := s.request(chat.PathCompletions, []byte(body), 1<<14, []string{r.endpoint("cold")})
	if got := p.endpoints(); len(got) != 1 || got[0] != r.endpoint("cold") {
		t.Fatalf("destination %v, want only cold's %s", got, r.endpoint("cold"))
	}
	s.respond("", "{}")
	s.close()
}

// TestNothingEligibleIs503: a subset naming no pod of the pool, and a pool
// with no pod, both answer 503 as an immediate response.
func TestNothingEligibleIs503(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{})
	body := []byte(completion("hello ", 3))
	for name, subset := range map[string][]string{"subset of strangers": {"10.9.9.9:8000"}, "empty subset": {}} {
		p := r.open().request(chat.PathCompletions, body, 1<<14, subset)
		if p.immediate == nil || p.immediate.GetStatus().GetCode() != 503 {
			t.Fatalf("%s: got %+v, want 503", name, p)
		}
	}
	if err := r.fleet.Update(nil); err != nil {
		t.Fatal(err)
	}
	p := r.open().request(chat.PathCompletions, body, 1<<14, nil)
	if p.immediate == nil || p.immediate.GetStatus().GetCode() != 503 {
		t.Fatalf("no pods: got %+v, want 503", p)
	}
}

// TestShedIs503: with every pod at its in-flight cap and the class's
// time-to-live running out, the picker sheds with 503 as the HTTP front
// does; the held request's end frees the slot for the next.
func TestShedIs503(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{MaxInFlightPerPod: 1, QueueTimeout: time.Millisecond})
	body := []byte(completion("hello ", 3))
	holder := r.open()
	if p := holder.request(chat.PathCompletions, body, 1<<14, nil); p.immediate != nil {
		t.Fatalf("first request refused: %v", p.immediate)
	}
	p := r.open().request(chat.PathCompletions, body, 1<<14, nil)
	if p.immediate == nil || p.immediate.GetStatus().GetCode() != 503 {
		t.Fatalf("at the cap: got %+v, want 503", p)
	}
	holder.respond(r.endpoint("a"), "{}")
	holder.close()
	waitUntil(t, "the slot to free", func() bool { return r.inFlight("a") == 0 })
	if p := r.open().request(chat.PathCompletions, body, 1<<14, nil); p.immediate != nil {
		t.Fatalf("after the slot freed: %v", p.immediate)
	}
}

// TestInvalidAndOversizedBodies get 400 and 413 as on the HTTP front.
func TestInvalidAndOversizedBodies(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{MaxBodyBytes: 1 << 16})
	if p := r.open().request(chat.PathCompletions, []byte(`{"model":"m","prompt":`), 1<<14, nil); p.immediate.GetStatus().GetCode() != 400 {
		t.Fatalf("malformed JSON: %+v, want 400", p)
	}
	big := []byte(completion("x", 1<<17))
	if p := r.open().request(chat.PathCompletions, big, 1<<14, nil); p.immediate.GetStatus().GetCode() != 413 {
		t.Fatalf("oversized: %+v, want 413", p)
	}
	if r.inFlight("a") != 0 {
		t.Fatalf("refused requests left %d in flight", r.inFlight("a"))
	}
}

// TestServedEndpointSettlesOnThePodThatServed: the gateway fell back to the
// second endpoint; its report moves the in-flight count and the
// speculation to the pod that served.
func TestServedEndpointSettlesOnThePodThatServed(t *testing.T) {
	r := newRig(t, map[string]load{"warm": idle, "cold": idle}, proxy.Config{})
	body := completion("the lighthouse keeper counts the ships at night ", 20)
	r.store("warm", chat.PathCompletions, body, 6)
	s := r.open()
	p := s.request(chat.PathCompletions, []byte(body), 1<<14, nil)
	if got := p.endpoints(); len(got) != 2 || got[0] != r.endpoint("warm") || got[1] != r.endpoint("cold") {
		t.Fatalf("destination %v, want warm then cold", got)
	}
	if r.inFlight("warm") != 1 {
		t.Fatal("the pick is not in flight on warm")
	}
	coldHit := func() int {
		for _, sc := range r.explain(chat.PathCompletions, body).Scores {
			if sc.Pod == "cold" {
				return sc.Hit.Speculative
			}
		}
		return -1
	}
	if coldHit() != 0 {
		t.Fatal("cold holds speculation before serving")
	}
	// The gateway reports cold served it with the response headers.
	s.send(servedHeaders(r.endpoint("cold")))
	s.recv()
	if r.inFlight("warm") != 0 || r.inFlight("cold") != 1 {
		t.Fatalf("in flight warm %d cold %d, want 0 and 1", r.inFlight("warm"), r.inFlight("cold"))
	}
	if coldHit() == 0 {
		t.Fatal("no speculation on cold, which served")
	}
	s.close()
	waitUntil(t, "the request to leave cold's count", func() bool { return r.inFlight("cold") == 0 })
}

// TestClientCancelFreesThePod: the gateway's client leaves after the pick
// and the stream is cancelled; the pod's slot is freed.
func TestClientCancelFreesThePod(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{})
	s := r.open()
	if p := s.request(chat.PathCompletions, []byte(completion("hello ", 3)), 1<<14, nil); p.immediate != nil {
		t.Fatal(p.immediate)
	}
	if r.inFlight("a") != 1 {
		t.Fatal("not in flight")
	}
	s.cancel()
	waitUntil(t, "the cancelled request to leave a's count", func() bool { return r.inFlight("a") == 0 })
}

// TestClientCancelWhileQueued: a stream cancelled while its request waits
// for a slot leaves the queue without an answer or a slot.
func TestClientCancelWhileQueued(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{MaxInFlightPerPod: 1, QueueTimeout: time.Hour})
	body := []byte(completion("hello ", 3))
	holder := r.open()
	holder.request(chat.PathCompletions, body, 1<<14, nil)
	queued := r.open()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Not s.send: t.Fatal belongs to the test's goroutine.
		_ = queued.stream.Send(reqHeaders(chat.PathCompletions))
		_ = queued.stream.Send(reqBody(body))
		_, _ = queued.stream.Recv() // ends with the cancellation
	}()
	waitUntil(t, "the request to queue", func() bool { return r.queued() == 1 })
	queued.cancel()
	<-done
	waitUntil(t, "the queue to empty", func() bool { return r.queued() == 0 })
	if r.inFlight("a") != 1 {
		t.Fatalf("in flight on a: %d, want only the holder", r.inFlight("a"))
	}
	holder.close()
	waitUntil(t, "every slot free", func() bool { return r.inFlight("a") == 0 })
}

// TestHealthServices answers liveness always, readiness and the ext_proc
// service while discovery has synced and the router is not draining.
func TestHealthServices(t *testing.T) {
	r := newRig(t, map[string]load{"a": idle}, proxy.Config{})
	hc := healthpb.NewHealthClient(r.grpc)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		return resp.GetStatus()
	}
	for _, svc := range []string{HealthLiveness, HealthReadiness, HealthExtProc} {
		if st := check(svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s: %v", svc, st)
		}
	}
	r.proxy.Drain()
	if st := check(HealthReadiness); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("readiness while draining: %v", st)
	}
	if st := check(HealthExtProc); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("ext_proc while draining: %v", st)
	}
	if st := check(HealthLiveness); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness while draining: %v", st)
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Fatal("an unknown service answered")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
