package proxy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// adversarialBodies are the shapes a hostile client sends first: deep
// nesting of every kind, huge counts, wrong types at every level, broken
// encodings, and the limits' own edges.
func adversarialBodies() []string {
	deep := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	return []string{
		strings.Repeat("[", 1<<16),
		strings.Repeat("{\"a\":", 1<<12),
		`{"messages":` + deep("[", "]", 200) + `}`,
		`{"prompt":` + deep("[", "]", 129) + `}`,
		`{"model":"m","messages":[{"role":"user","content":"Hello"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"` +
			strings.Repeat("[", 5000) + `"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":` + deep(`{"p":`, "}", 60)[:len(deep(`{"p":`, "}", 60))-60] + "1" + strings.Repeat("}", 60) + `}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template":"{{ ((((((1)))))) }}"}`,
		`{"model":"m","prompt":"Hello, my dog is cute"}`,
		`{"model":"m","prompt":[1,2,3,151643]}`,
		`{"model":"m","prompt":[[1,2],[3],"abc"]}`,
		`{"model":"m","prompt":[4294967296]}`,
		`{"model":"m","prompt":[-1]}`,
		`{"model":"m","prompt":[1e400]}`,
		`{"model":"m","prompt":"\ud800"}`,
		`{"model":"m","prompt":"` + strings.Repeat("a", 1<<16) + `"}`,
		`{"model":"m","prompt":"` + strings.Repeat(" ", 1<<16) + `"}`,
		`{"model":["m"],"prompt":"x"}`,
		`{"model":"m","cache_salt":"","prompt":"x"}`,
		`{"model":"m","prompt":"x","prompt":"y"}`,
		`{"model":"unknown","prompt":"x"}`,
		`{"model":"m","prompt_embeds":"AAAA"}`,
		`{"messages":[{"role":"user","content":null}],"add_generation_prompt":false,"continue_final_message":true}`,
		`{"messages":[{"role":1}]}`,
		`{"messages":"hi"}`,
		`NaN`, `null`, `"x"`, `[]`, `{}`, ``, `{"a":1}garbage`, "\xff\xfe", `{"prompt":"x"`,
	}
}

// fuzzEndpoint runs one endpoint's fuzz target: whatever the body, the
// router answers, with 200 (the stand-in pod always accepts) or 400 (a
// refusal naming why); nothing crashes, hangs or answers 5xx.
func fuzzEndpoint(f *testing.F, path string) {
	for _, b := range adversarialBodies() {
		f.Add([]byte(b))
	}
	// The admission llmd_prefix_router deploys: vLLM's max_num_seqs, 2 pending, the prefill bound and the KV bound.
	s, _ := newServer(f, map[string]string{"a": okPod(f).URL, "b": okPod(f).URL}, Config{MaxInFlightPerPod: 256, MaxPendingPerPod: 2, MaxPendingPrefillPerPod: 2048, PrefillReserve: 0.25, KVOutputReserve: 1024})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			if !bytes.Contains(rec.Body.Bytes(), []byte(`"message"`)) {
				t.Fatalf("400 without a reason: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d for %d-byte body: %s", rec.Code, len(body), rec.Body)
		}
	})
}

// FuzzCompletions fuzzes POST /v1/completions.
func FuzzCompletions(f *testing.F) { fuzzEndpoint(f, "/v1/completions") }

// FuzzChatCompletions fuzzes POST /v1/chat/completions.
func FuzzChatCompletions(f *testing.F) { fuzzEndpoint(f, "/v1/chat/completions") }

// FuzzRoute fuzzes POST /v1/route, which explains without forwarding.
func FuzzRoute(f *testing.F) { fuzzEndpoint(f, "/v1/route") }
