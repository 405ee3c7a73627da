package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// TestPriorityClassesFlag checks --priority-classes parses names and TTLs in
// order, from the flag or LLMD_PRIORITY_CLASSES, and names the fault in bad
// values.
func TestPriorityClassesFlag(t *testing.T) {
	o, err := parseServeFlags([]string{"--priority-classes", "high=60s, standard,low=10s"}, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := classesFlag{{Name: "high", TTL: time.Minute}, {Name: "standard"}, {Name: "low", TTL: 10 * time.Second}}
	if !reflect.DeepEqual(o.classes, want) || o.classes.String() != "high=1m0s,standard,low=10s" {
		t.Errorf("classes %+v (%s)", o.classes, o.classes.String())
	}
	env := map[string]string{"LLMD_PRIORITY_CLASSES": "gold,bronze"}
	if o, err = parseServeFlags(nil, io.Discard, func(k string) string { return env[k] }); err != nil || len(o.classes) != 2 || o.classes[1].Name != "bronze" {
		t.Errorf("from the environment: %+v, %v", o.classes, err)
	}
	for value, want := range map[string]string{
		"high,,low":    "empty class name",
		"high,high":    `class "high" named twice`,
		"high=soon":    `class "high": TTL "soon" is not a positive duration`,
		"high=-1s,low": `TTL "-1s"`,
	} {
		_, err := parseServeFlags([]string{"--priority-classes", value}, io.Discard, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "priority-classes") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming the flag and %q", value, err, want)
		}
	}
}

// TestAPIKeysFile checks --api-keys-file's lines and that each error names
// the file's line and the fix, never echoing a would-be key.
func TestAPIKeysFile(t *testing.T) {
	sum := sha256.Sum256([]byte("key-of-acme"))
	digest := hex.EncodeToString(sum[:])
	path := filepath.Join(t.TempDir(), "keys")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# tenants\n\n" + digest + " tenant=acme class=standard\n" + strings.ToUpper(digest) + "\n")
	keys, err := loadAPIKeys(path)
	want := []proxy.APIKey{{SHA256: sum, Tenant: "acme", Class: "standard"}, {SHA256: sum}}
	if err != nil || !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	for text, want := range map[string]string{
		"key-of-acme tenant=acme\n":    ":1: the first field must be the key's SHA-256 in 64 hex digits",
		"# c\n" + digest + " tenant\n": `:2: field "tenant": write tenant=NAME or class=NAME`,
		digest + " team=acme\n":        `:1: unknown field "team"`,
		digest[:62] + " tenant=acme\n": ":1: the first field must be the key's SHA-256 in 64 hex digits (printf %s KEY | sha256sum), got 62 characters",
	} {
		write(text)
		_, err := loadAPIKeys(path)
		if err == nil || !strings.Contains(err.Error(), path+want) {
			t.Errorf("%q: error %v, want %q", text, err, path+want)
		}
		if err != nil && strings.Contains(err.Error(), "key-of-acme") {
			t.Errorf("the error echoes the key: %v", err)
		}
	}
	if _, err := loadAPIKeys(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "--api-keys-file") {
		t.Errorf("absent file: %v", err)
	}
}

// TestServeFlowFlags runs a router with the flow flags and keys file the
// provider renders (workloads.Router: its args and its ConfigMap's keys
// file, as the pod would mount it) over two replica processes (time scale
// 1, so a 200-token stream holds its pod's one slot for seconds): a key
// from the file is accepted and another refused, an unknown priority
// header is 400 naming the classes, and a request in the class given a
// 300 ms TTL gets 503 once that TTL runs out while both slots are taken,
// counted under its class.
func TestServeFlowFlags(t *testing.T) {
	sum := sha256.Sum256([]byte("key-of-acme"))
	spec := workloads.Router{Name: "router", Namespace: "llmd", Image: "ghcr.io/llmd-dev/llmd-router:test", Replicas: 1,
		Target:  workloads.RouterTarget{Namespace: "llmd", Selector: "app=vllm", HTTPPort: 8000, KVEventsPort: 5557, ServedModel: simModelName},
		Scorers: config.DefaultScorers(),
		Limits: workloads.RouterLimits{MaxInFlightPerPod: 1, MaxQueue: 16, QueueTimeout: 30 * time.Second, Drain: time.Minute,
			KVOutputReserve: 1024, KVHeadroom: 0.2, MaxPendingPrefillPerPod: 2048, PrefillReserve: 0.25,
			Classes: []workloads.RouterClass{{Name: "gold", TTL: 20 * time.Second}, {Name: "standard"}, {Name: "batch", TTL: 300 * time.Millisecond}}},
		APIKeys:   []workloads.RouterAPIKey{{SHA256: hex.EncodeToString(sum[:]), Tenant: "acme", Class: "standard"}},
		LogLevel:  "info",
		Service:   workloads.Exposure{Type: "ClusterIP", Port: 8000},
		Resources: workloads.RouterResources{CPU: "100m", Memory: "128Mi", MemoryLimit: "512Mi"}}
	args := renderedFlowArgs(t, spec)
	infos, _ := startReplicas(t, 2)
	r := startRouter(t, infos, args...)
	auth := []string{"Authorization", "Bearer key-of-acme"}
	answer := func(body []byte, header ...string) (*http.Response, string) {
		resp := post(t, r.url+"/v1/completions", body, header...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	short := completion(t, tokens(20, 3), 2, false)
	if resp, _ := answer(short, "Authorization", "Bearer another-key"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a key not in the file: status %d", resp.StatusCode)
	}
	if resp, b := answer(short, append(auth, proxy.PriorityHeader, "platinum")...); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(b, "x-llmd-priority") || !strings.Contains(b, "gold, standard, batch") {
		t.Errorf("unknown class: status %d: %s", resp.StatusCode, b)
	}

	ctx, cancelLong := context.WithCancel(context.Background())
	defer cancelLong()
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/completions",
			bytes.NewReader(completion(t, tokens(32, uint32(10+i)), 200, true)))
		req.Header.Set(auth[0], auth[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: status %d, %v", i, resp.StatusCode, err)
		}
	}
	began := time.Now()
	resp, b := answer(short, append(auth, proxy.PriorityHeader, "batch")...)
	waited := time.Since(began)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || waited < 300*time.Millisecond {
		t.Errorf("batch request with both slots taken: status %d after %v, Retry-After %q: %s", resp.StatusCode, waited, resp.Header.Get("Retry-After"), b)
	}
	if n := r.gauge(t, "llmd_router_shed_total", "class", "batch", "reason", "no_capacity"); n != 1 {
		t.Errorf("batch sheds %v, want 1", n)
	}
}

// renderedFlowArgs are spec's admission flags as its Deployment passes them,
// with the keys file its ConfigMap carries written where the test can
// mount it.
func renderedFlowArgs(t *testing.T, spec workloads.Router) []string {
	t.Helper()
	objs, err := spec.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	for _, o := range objs {
		if o.Kind == "ConfigMap" && o.Name == spec.Name {
			if err := o.Into(&cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := filepath.Join(t.TempDir(), workloads.RouterAPIKeysFile)
	if err := os.WriteFile(keys, []byte(cm.Data[workloads.RouterAPIKeysFile]), 0o600); err != nil {
		t.Fatal(err)
	}
	var out []string
	rendered := spec.Args()
	for i := 0; i+1 < len(rendered); i += 2 {
		switch flag, value := rendered[i], rendered[i+1]; flag {
		case "--api-keys-file":
			out = append(out, flag, keys)
		case "--max-in-flight-per-pod", "--max-pending-per-pod", "--max-queue", "--queue-timeout", "--priority-classes", "--default-class", "--tenant-share",
			"--kv-output-reserve", "--kv-headroom", "--max-pending-prefill-per-pod", "--prefill-reserve":
			out = append(out, flag, value)
		}
	}
	if !slices.Contains(out, "--api-keys-file") || !slices.Contains(out, "--priority-classes") || !slices.Contains(out, "--kv-headroom") ||
		!slices.Contains(out, "--max-pending-prefill-per-pod") || !slices.Contains(out, "--prefill-reserve") {
		t.Fatalf("the rendered args %q lack the flow flags", rendered)
	}
	return out
}
