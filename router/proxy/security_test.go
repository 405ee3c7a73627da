package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Security group: hostile input and the router's surface.

// TestNestedBracketsBody sends the body that once killed the router with a
// fatal stack overflow (2 MB of "[", under the body limit) to every routed
// endpoint of a real HTTP server, then checks the server still serves.
func TestNestedBracketsBody(t *testing.T) {
	s, _ := newServer(t, map[string]string{"a": okPod(t).URL}, Config{})
	front := httptest.NewServer(s)
	defer front.Close()
	body := strings.Repeat("[", 2<<20)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/route"} {
		resp, err := http.Post(front.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var e struct{ Error struct{ Message string } }
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error.Message, "MaxJSONDepth") {
			t.Errorf("%s: status %d, message %q (%v); want 400 naming MaxJSONDepth", path, resp.StatusCode, e.Error.Message, err)
		}
	}
	resp, err := http.Post(front.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the attack: status %d", resp.StatusCode)
	}
}

// TestSurface checks what the router serves: the allowed engine paths pass
// through, any other path is 404 without reaching a pod.
func TestSurface(t *testing.T) {
	var reached []string
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			reached = append(reached, r.Method+" "+r.URL.Path)
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer pod.Close()
	s, _ := newServer(t, map[string]string{"a": pod.URL}, Config{})
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/models", 200}, {http.MethodGet, "/health", 200}, {http.MethodGet, "/version", 200},
		{http.MethodPost, "/tokenize", 200}, {http.MethodPost, "/detokenize", 200},
		{http.MethodPost, "/reset_prefix_cache", 404}, {http.MethodPost, "/sleep", 404}, {http.MethodPost, "/collective_rpc", 404},
		{http.MethodPost, "/v1/embeddings", 404}, {http.MethodGet, "/v1/models/x", 404},
		{http.MethodDelete, "/v1/models", 404},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(`{}`)))
		if rec.Code != c.want {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, rec.Code, c.want)
		}
	}
	if len(reached) != 5 {
		t.Errorf("the pod saw %v, want the five allowed paths only", reached)
	}
}

// TestAuthentication checks --api-key as vLLM checks it (every /v1 path,
// not OPTIONS, not the probes) and the admin token on /v1/route.
func TestAuthentication(t *testing.T) {
	var auth []string
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			auth = append(auth, r.Header.Get("Authorization"))
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer pod.Close()
	body := `{"model":"m","prompt":"hi"}`
	for _, c := range []struct {
		name, key, admin string
		method, path     string
		header           string
		want             int
	}{
		{"no key configured", "", "", "POST", "/v1/completions", "", 200},
		{"key missing", "k1", "", "POST", "/v1/completions", "", 401},
		{"key wrong", "k1", "", "POST", "/v1/chat/completions", "Bearer k2", 401},
		{"key prefix", "k1", "", "POST", "/v1/completions", "Bearer k", 401},
		{"not bearer", "k1", "", "POST", "/v1/completions", "Basic k1", 401},
		{"key right", "k1", "", "POST", "/v1/completions", "Bearer k1", 200},
		{"models need the key", "k1", "", "GET", "/v1/models", "", 401},
		{"tokenize is outside /v1", "k1", "", "POST", "/tokenize", "", 200},
		{"probes stay open", "k1", "", "GET", "/readyz", "", 200},
		{"route with the key", "k1", "", "POST", "/v1/route", "Bearer k1", 200},
		{"route needs the admin token", "k1", "adm", "POST", "/v1/route", "Bearer k1", 401},
		{"route with the admin token", "k1", "adm", "POST", "/v1/route", "Bearer adm", 200},
		{"admin token only", "", "adm", "POST", "/v1/route", "", 401},
		{"admin token leaves serving open", "", "adm", "POST", "/v1/completions", "", 200},
	} {
		s, _ := newServer(t, map[string]string{"a": pod.URL}, Config{APIKey: c.key, AdminToken: c.admin})
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(body))
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		rec := httptest.NewRecorder()
		auth = nil
		s.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, rec.Code, c.want, rec.Body)
		}
		if c.want == 401 && len(auth) != 0 {
			t.Errorf("%s: refused request reached the pod", c.name)
		}
		if c.name == "key right" && (len(auth) != 1 || auth[0] != "Bearer k1") {
			t.Errorf("the pod did not get the key: %v", auth)
		}
	}
}
