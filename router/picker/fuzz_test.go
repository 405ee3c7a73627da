package picker

import (
	"bytes"
	"slices"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// FuzzProcess drives the picker with hostile requests as the gateway
// streams them (any path, body, chunking and subset hint): it never
// panics, answers every request either with a refusal the protocol allows
// or with endpoints of the pool and the body unchanged, and leaves no
// request counted in flight after the stream ends. The seed corpus is in
// testdata/fuzz/FuzzProcess.
func FuzzProcess(f *testing.F) {
	r := newRig(f, map[string]load{"a": idle, "b": {running: 1}}, proxy.Config{MaxBodyBytes: 1 << 16})
	f.Add(chat.PathCompletions, []byte(`{"model":"m","prompt":"hello there"}`), uint16(7), false)
	f.Add(chat.PathChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), uint16(1024), true)
	f.Add(chat.PathCompletions, []byte(`{"model":"m","prompt":[[[[[[[[1]]]]]]]]}`), uint16(3), false)
	f.Add("/v1/models", []byte{}, uint16(0), false)
	f.Fuzz(func(t *testing.T, path string, body []byte, chunk uint16, hinted bool) {
		var subset []string
		if hinted {
			subset = []string{r.endpoint("b")}
		}
		s := r.openFor(t)
		p := s.request(path, body, max(int(chunk), 1), subset)
		if p.immediate != nil {
			if code := p.immediate.GetStatus().GetCode(); !slices.Contains([]int32{400, 413, 429, 503}, int32(code)) {
				t.Fatalf("refused with %d", code)
			}
		} else {
			for _, e := range p.endpoints() {
				if _, ok := r.proxy.PodAt(e); !ok {
					t.Fatalf("endpoint %q is no pod of the pool", e)
				}
			}
			if hinted && p.endpoints()[0] != r.endpoint("b") {
				t.Fatalf("picked %v outside the subset", p.endpoints())
			}
			if !bytes.Equal(p.body, body) {
				t.Fatalf("body changed: %d bytes re-sent of %d", len(p.body), len(body))
			}
		}
		s.cancel()
		waitUntil(t, "no request in flight", func() bool { return r.inFlight("a") == 0 && r.inFlight("b") == 0 })
	})
}
