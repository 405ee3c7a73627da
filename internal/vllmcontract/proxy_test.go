package vllmcontract

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// tap is a transparent reverse proxy in front of one engine that records
// the bytes of each answer the engine gave on a /v1 path, so a test can
// hold what the router passed on against what the engine sent.
type tap struct {
	*httptest.Server
	mu   sync.Mutex
	last map[string]recorded // by path
}

type recorded struct {
	status int
	header http.Header
	body   []byte
}

func newTap(t *testing.T, engineURL string) *tap {
	t.Helper()
	u, err := url.Parse(engineURL)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{last: map[string]recorded{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // streams pass at once, as the router needs them
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasPrefix(resp.Request.URL.Path, "/v1/") {
			return nil
		}
		path, status, header := resp.Request.URL.Path, resp.StatusCode, resp.Header.Clone()
		resp.Body = &teeBody{ReadCloser: resp.Body, done: func(b []byte) {
			tp.mu.Lock()
			tp.last[path] = recorded{status, header, b}
			tp.mu.Unlock()
		}}
		return nil
	}
	tp.Server = httptest.NewServer(rp)
	t.Cleanup(tp.Close)
	return tp
}

func (tp *tap) answer(path string) recorded {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.last[path]
}

// teeBody keeps what was read and hands it over at EOF or close.
type teeBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	done func([]byte)
	once sync.Once
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.once.Do(func() { b.done(b.buf.Bytes()) })
	}
	return n, err
}

func (b *teeBody) Close() error {
	b.once.Do(func() { b.done(b.buf.Bytes()) })
	return b.ReadCloser.Close()
}

// TestProxyPassesTheEnginesAnswers sends requests through a real router to
// a real engine and holds each answer against the bytes the engine sent:
// non-streaming answers and streams (chat and completions, usage
// included) unchanged, and the engine's own refusals (an unknown model, a
// prompt past --max-model-len) as the engine gave them, not retried
// elsewhere or rewritten.
func TestProxyPassesTheEnginesAnswers(t *testing.T) {
	e := engines(t)[0]
	tp := newTap(t, e.URL)
	cfg := routerConfig(t, testFleet(), []*testenv.Engine{e})
	cfg.Discovery.Static[0].HTTP = tp.URL
	routerURL, _ := startRouter(t, cfg)
	long := strings.Repeat("hello ", 4200) // 4,201 tokens against a 4,096-token context
	for _, c := range []struct {
		name, path string
		body       map[string]any
		status     int
	}{
		{"completion", "/v1/completions", map[string]any{"model": servedName, "prompt": "The quick brown fox", "max_tokens": 8}, 200},
		{"chat", "/v1/chat/completions", map[string]any{"model": servedName, "max_tokens": 8,
			"messages": []map[string]any{{"role": "user", "content": "Héllo 🦊"}}}, 200},
		{"completion stream", "/v1/completions", map[string]any{"model": servedName, "prompt": "The quick brown fox", "max_tokens": 8,
			"stream": true, "stream_options": map[string]any{"include_usage": true}}, 200},
		{"chat stream", "/v1/chat/completions", map[string]any{"model": servedName, "max_tokens": 8, "stream": true,
			"stream_options": map[string]any{"include_usage": true}, "messages": []map[string]any{{"role": "user", "content": "hi"}}}, 200},
		{"unknown model", "/v1/completions", map[string]any{"model": "no-such-model", "prompt": "hi", "max_tokens": 2}, 404},
		{"prompt past max-model-len", "/v1/completions", map[string]any{"model": servedName, "prompt": long, "max_tokens": 2}, 400},
		{"prompt past max-model-len, streaming", "/v1/chat/completions", map[string]any{"model": servedName, "max_tokens": 2, "stream": true,
			"messages": []map[string]any{{"role": "user", "content": long}}}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, got := post(t, routerURL+c.path, c.body)
			want := tp.answer(c.path)
			if want.body == nil {
				t.Fatalf("the engine was not asked (the router answered %d %s itself)", status, got)
			}
			if status != c.status || want.status != c.status {
				t.Errorf("status: router %d, engine %d, want %d", status, want.status, c.status)
			}
			if !bytes.Equal(got, want.body) {
				t.Errorf("the router's answer differs from the engine's:\n router %q\n engine %q", got, want.body)
			}
			if stream, _ := c.body["stream"].(bool); stream && c.status == 200 {
				if !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) || !bytes.Contains(got, []byte(`"usage"`)) {
					t.Errorf("the stream lacks its usage chunk or [DONE]: %q", got)
				}
			}
			tp.mu.Lock()
			delete(tp.last, c.path)
			tp.mu.Unlock()
		})
	}
}
