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
