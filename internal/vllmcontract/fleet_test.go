package vllmcontract

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// TestFleetArgumentsAreVLLMs renders the fleet's `vllm serve` arguments for
// every vllm.* and kv_events.* option of llmd_model_fleet and has the real
// engine's own parser and configuration judge each: a flag vLLM renames or
// drops, or a value it stops accepting, fails here instead of in a rollout.
func TestFleetArgumentsAreVLLMs(t *testing.T) {
	inst := testenv.VLLM(t)
	type variant struct {
		name   string
		edit   func(*workloads.Fleet)
		refuse string // "" when vLLM must accept the arguments
	}
	variants := []variant{
		{"defaults", func(*workloads.Fleet) {}, ""},
		{"provider defaults", func(f *workloads.Fleet) {
			f.ServedName, f.VLLM.MaxModelLen, f.VLLM.MaxNumSeqs, f.VLLM.ExtraArgs = "Qwen/Qwen2.5-7B-Instruct", 8192, 256, nil
		}, ""},
		{"vllm.block_size 32", func(f *workloads.Fleet) { f.VLLM.BlockSize = 32 }, ""},
		{"vllm.block_size 128", func(f *workloads.Fleet) { f.VLLM.BlockSize = 128 }, ""},
		{"vllm.gpu_memory_utilization", func(f *workloads.Fleet) { f.VLLM.GPUMemoryUtilization = 0.55 }, ""},
		{"vllm.max_model_len", func(f *workloads.Fleet) { f.VLLM.MaxModelLen = 2048 }, ""},
		{"vllm.max_num_seqs", func(f *workloads.Fleet) { f.VLLM.MaxNumSeqs = 1 }, ""},
		{"vllm.extra_args", func(f *workloads.Fleet) {
			f.VLLM.ExtraArgs = append(f.VLLM.ExtraArgs, "--max-num-batched-tokens", "2048", "--prefix-caching-hash-algo", "sha256_cbor")
		}, ""},
		{"kv_events.port and replay_port", func(f *workloads.Fleet) { f.KVEvents.Port, f.KVEvents.ReplayPort = 6100, 6101 }, ""},
		{"kv_events.topic without placeholders", func(f *workloads.Fleet) { f.KVEvents.Topic = "kv" }, ""},
		{"kv_events.topic empty", func(f *workloads.Fleet) { f.KVEvents.Topic = "" }, ""},
		{"rollout.drain_timeout", func(f *workloads.Fleet) { f.Rollout.DrainSeconds = 90 }, ""},
		{"vllm.scheduling_policy fcfs", func(f *workloads.Fleet) { f.VLLM.SchedulingPolicy = workloads.PolicyFCFS }, ""},
		// The judge can refuse: a flag vLLM does not have, a value out of range.
		{"an unknown flag", func(f *workloads.Fleet) { f.VLLM.ExtraArgs = append(f.VLLM.ExtraArgs, "--no-such-flag") }, "--no-such-flag"},
		{"a context longer than the model's", func(f *workloads.Fleet) { f.VLLM.MaxModelLen = 1 << 20 }, "max_model_len"},
	}
	var cases [][]string
	for _, v := range variants {
		f := testFleet()
		v.edit(&f)
		args, err := f.Args()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		args[0] = inst.Model // the pod's /models/<path>: here the tiny model
		cases = append(cases, args)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	answers := filepath.Join(t.TempDir(), "answers.json")
	cmd := exec.Command(inst.Python, "testdata/parse_args.py", answers)
	cmd.Env = append(cmd.Environ(), "HF_HUB_OFFLINE=1", "VLLM_TARGET_DEVICE=cpu", "VLLM_CPU_KVCACHE_SPACE=1")
	cmd.Stdin = bytes.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("parse_args.py: %v\n%s", err, tailLines(string(out), 20))
	}
	b, err := os.ReadFile(answers)
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		OK    bool
		Error string
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got) != len(variants) {
		t.Fatalf("answers %s: %v (%d for %d cases)", b, err, len(got), len(variants))
	}
	for i, v := range variants {
		switch {
		case v.refuse == "" && !got[i].OK:
			t.Errorf("%s: vLLM %s refuses the fleet's arguments %q: %s", v.name, testenv.VLLMVersion, cases[i][1:], got[i].Error)
		case v.refuse != "" && got[i].OK:
			t.Errorf("%s: vLLM accepted %q, which it must refuse", v.name, cases[i][1:])
		case v.refuse != "" && !strings.Contains(got[i].Error, v.refuse):
			t.Errorf("%s: refused for %q, want a reason naming %q", v.name, got[i].Error, v.refuse)
		}
	}
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
