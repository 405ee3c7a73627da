package picker

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// BenchmarkFronts measures one request through each front of one router,
// in the same run, same prompt (a 1.7 KB completion, its prefix held by
// one of two pods): "http" is the proxy's whole path (read, tokenize,
// pick, forward to a stand-in pod answering at once, relay its response);
// "grpc" is the picker's whole exchange as a gateway drives it over TLS
// (headers, body, destination answer, body re-sent, response headers and
// body passed through, stream closed): the gateway's forwarding is not in
// it, the TLS round trips are. "grpc-decision" stops at the destination
// answer: the latency the gateway waits before it can send to the pod.
func BenchmarkFronts(b *testing.B) {
	r := newRig(b, map[string]load{"warm": idle, "cold": idle}, proxy.Config{})
	body := completion("the lighthouse keeper counts the ships at night ", 35)
	r.store("warm", chat.PathCompletions, body, 6)
	b.Run("http", func(b *testing.B) {
		for b.Loop() {
			resp, err := http.Post(r.http.URL+chat.PathCompletions, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatal(resp.Status)
			}
		}
	})
	b.Run("grpc", func(b *testing.B) {
		for b.Loop() {
			s := r.openFor(b)
			p := s.request(chat.PathCompletions, []byte(body), 16<<10, nil)
			if p.immediate != nil {
				b.Fatal(p.immediate)
			}
			s.respond(p.endpoints()[0], `{"choices":[]}`)
			s.close()
			s.cancel()
		}
	})
	b.Run("grpc-decision", func(b *testing.B) {
		for b.Loop() {
			s := r.openFor(b)
			if p := s.request(chat.PathCompletions, []byte(body), 16<<10, nil); p.immediate != nil {
				b.Fatal(p.immediate)
			}
			s.cancel()
		}
	})
}
