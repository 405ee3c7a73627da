package vllmcontract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestEngineDrainsOnSIGTERM stops a real engine started with the fleet's
// arguments and llmd_model_fleet's rollout.drain_timeout (vLLM's
// --shutdown-timeout) while it streams an answer, as a scale-in or a
// rollout does once the pod's preStop ends: the open stream must finish
// whole and the engine must exit once its open request is done. vLLM's own
// default (0) aborts open requests on SIGTERM, which every scale-in would
// turn into failed requests. Nothing is sent after the signal, as in the
// fleet: the router drops a terminating pod at once and the preStop keeps
// it serving until kube-proxy has dropped it too. (On v0.32.0 requests
// sent during the drain are still accepted, and with them arriving the
// open stream stopped after its first token: BENCHMARKS.md.)
func TestEngineDrainsOnSIGTERM(t *testing.T) {
	f := testFleet()
	f.Rollout.DrainSeconds = 60
	e := testenv.StartEngine(t, engineOptions(t, f))
	const want = 160
	body, err := json.Marshal(map[string]any{"model": servedName, "prompt": tokenPrompt(7, 64), "max_tokens": want,
		"temperature": 0, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(e.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	tokens, finish, signalled := 0, "", time.Time{}
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Usage != nil {
			tokens = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if tokens > 0 && signalled.IsZero() {
			signalled = time.Now()
			e.Terminate()
		}
	}
	if err := sc.Err(); err != nil {
		t.Logf("engine log after SIGTERM:\n%s", e.LogTail(80))
		t.Fatalf("the stream broke after SIGTERM, at %d of %d tokens: %v", tokens, want, err)
	}
	if tokens != want || finish != "length" {
		t.Logf("engine log after SIGTERM:\n%s", e.LogTail(80))
		t.Fatalf("the stream ended at %d of %d tokens (finish_reason %q) after SIGTERM: it was aborted, not drained", tokens, want, finish)
	}
	t.Logf("SIGTERM after the first token; the open stream finished its %d tokens %s later", want, time.Since(signalled).Round(time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	for !e.Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("the engine had not exited 30 s after its last open request ended:\n%s", e.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
