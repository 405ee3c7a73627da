package vllmcontract

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// servedName is the model name the fleet serves and the router routes.
const servedName = "tiny"

// poolBlocks is each pool engine's KV cache in blocks of 64 tokens
// (--num-gpu-blocks-override): small enough that the tests evict, large
// enough for a few long prompts at once.
const poolBlocks = 256

// testFleet is the fleet the engines run, as llmd_model_fleet renders it
// for a user who sets these attributes: the defaults but a 4,096-token
// context (the tiny model's budget on a core), a small batch and a small
// KV cache, priority scheduling, eager mode (no torch.compile on CPU) and
// the dev-mode reset. Under priority scheduling requests of equal priority
// (every request a router without --engine-priority sends) are taken in
// arrival order, as under fcfs.
func testFleet() workloads.Fleet {
	return workloads.Fleet{Name: "tiny", Namespace: "llmd", ServedName: servedName, ModelPath: "tiny",
		VLLM: workloads.VLLM{BlockSize: 64, GPUMemoryUtilization: 0.9, MaxModelLen: 4096, MaxNumSeqs: 16, SchedulingPolicy: workloads.PolicyPriority,
			TensorParallelSize: 1, ExtraArgs: []string{"--enforce-eager", "--num-gpu-blocks-override", strconv.Itoa(poolBlocks)},
			Env: map[string]string{"VLLM_SERVER_DEV_MODE": "1"}},
		KVEvents: workloads.KVEvents{Port: 5557, ReplayPort: 5558, Topic: config.DefaultTopic}}
}

// engineOptions start an engine as the fleet's pod would run.
func engineOptions(t testing.TB, f workloads.Fleet) testenv.EngineOptions {
	t.Helper()
	args, err := f.Args()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.EngineOptions{Args: args, Env: f.VLLM.Env}
}

var (
	poolOnce sync.Once
	pool     []*testenv.Engine
)

// engines are this test binary's two engines, started on first use and
// shared: a test that restarts, pauses or resets one leaves it serving
// with an empty cache, and no test assumes what another left cached.
func engines(t testing.TB) []*testenv.Engine {
	t.Helper()
	poolOnce.Do(func() { pool = testenv.StartEngines(t, 2, engineOptions(t, testFleet())) })
	if len(pool) != 2 {
		t.Fatal("the engine pool failed to start in an earlier test")
	}
	return pool
}

// routerConfig is the router's config for these engines as the provider
// renders it from the fleet's router_target, with static discovery.
func routerConfig(t testing.TB, f workloads.Fleet, es []*testenv.Engine) *config.Config {
	t.Helper()
	tgt := f.Target()
	model := testenv.VLLM(t).Model
	c := &config.Config{Listen: "127.0.0.1:0", Model: tgt.ServedModel, BlockSize: tgt.BlockSize}
	c.Discovery.Topic = tgt.Topic
	c.Tokenizer.JSON = filepath.Join(model, "tokenizer.json")
	c.Tokenizer.Config = filepath.Join(model, "tokenizer_config.json")
	for _, e := range es {
		c.Discovery.Static = append(c.Discovery.Static, config.StaticPod{Name: e.Name, IP: e.IP, HTTP: e.URL,
			KVEvents: e.ZMQ(tgt.KVEventsPort), Replay: e.ZMQ(tgt.ReplayPort)})
	}
	c.Default()
	return c
}

// startRouter runs `llmd-router serve` with c and returns its base URL.
func startRouter(t testing.TB, c *config.Config, args ...string) (string, *testenv.RouterProcess) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartRouter(t, 1, append([]string{"serve", "--config", path}, args...)...)
	url := fmt.Sprintf("http://%s", p.Announced[0]["listen"])
	// As a Service would: no request before /readyz says discovery has
	// delivered the fleet (until then the router rightly answers 503).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("router at %s not ready after 30s (%v)\n%s", url, err, p.Stderr())
		}
	}
}
