package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWithPrioritySetsOnlyTheTopLevelMember checks the rewrite on the
// bodies a client can send: no priority (added first), one (replaced in
// place), duplicates (all replaced, since Python's json keeps the last), an
// escaped key (the same member once decoded), a nested "priority" (left
// alone), an empty object, and bodies that are not a JSON object.
func TestWithPrioritySetsOnlyTheTopLevelMember(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"added", `{"model":"m","prompt":"hi"}`, `{"priority":2,"model":"m","prompt":"hi"}`},
		{"replaced", `{"model":"m", "priority" : -7 ,"prompt":"hi"}`, `{"model":"m", "priority" : 2 ,"prompt":"hi"}`},
		{"duplicates", `{"priority":0,"prompt":"hi","priority":9}`, `{"priority":2,"prompt":"hi","priority":2}`},
		{"escaped key", `{"\u0070riority":-100,"prompt":"hi"}`, `{"\u0070riority":2,"prompt":"hi"}`},
		{"a string value", `{"priority":"urgent"}`, `{"priority":2}`},
		{"nested left alone", `{"messages":[{"role":"user","content":"x","priority":-1}],"extra":{"priority":-1}}`,
			`{"priority":2,"messages":[{"role":"user","content":"x","priority":-1}],"extra":{"priority":-1}}`},
		{"empty object", ` { }`, ` {"priority":2 }`},
	} {
		got, err := withPriority([]byte(tc.in), 2)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: withPriority(%s) = %s, %v; want %s", tc.name, tc.in, got, err, tc.want)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil || m["priority"] != 2.0 {
			t.Errorf("%s: %s decodes to priority %v (%v)", tc.name, got, m["priority"], err)
		}
	}
	for _, in := range []string{``, `[]`, `"priority"`, `{"priority":`, `{"a":1,}`} {
		if got, err := withPriority([]byte(in), 1); err == nil {
			t.Errorf("withPriority(%q) = %s, want an error", in, got)
		}
	}
}

// TestEnginePriorityReachesThePod sends requests in each class through the
// router to a stand-in pod that records the body it gets, and checks the
// pod sees the class's rank as priority (overriding the client's) with
// EnginePriority on, and the client's body unchanged with it off.
func TestEnginePriorityReachesThePod(t *testing.T) {
	got := make(chan map[string]any, 1)
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			idleMetrics(w, r)
			return
		}
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		got <- m
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[]}`)
	}))
	t.Cleanup(pod.Close)
	send := func(s *Server, class string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":1,"priority":-50}`))
		if class != "" {
			req.Header.Set(PriorityHeader, class)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("class %q: %d %s", class, rec.Code, rec.Body)
		}
		return <-got
	}
	on, _ := newServer(t, map[string]string{"p0": pod.URL}, Config{EnginePriority: true})
	for class, want := range map[string]float64{"high": 0, "": 1, "standard": 1, "low": 2} {
		if m := send(on, class); m["priority"] != want || m["prompt"] != "hello" {
			t.Errorf("engine priority on, class %q: pod got %v, want priority %v", class, m, want)
		}
	}
	off, _ := newServer(t, map[string]string{"p0": pod.URL}, Config{})
	if m := send(off, "high"); m["priority"] != -50.0 {
		t.Errorf("engine priority off: pod got priority %v, want the client's -50", m["priority"])
	}
}
