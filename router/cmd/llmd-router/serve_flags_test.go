package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// TestServeSettingsPrecedence checks flags over LLMD_* variables over the
// YAML file over defaults, and the two static-pod shorthands.
func TestServeSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
model: from-file
listen: 127.0.0.1:7000
block_size: 32
discovery:
  kubernetes: {namespace: llm, selector: app=vllm}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LLMD_LISTEN": "127.0.0.1:7001", "LLMD_MODEL": "from-env", "LLMD_MAX_QUEUE": "7"}
	getenv := func(k string) string { return env[k] }

	o, err := parseServeFlags([]string{"--config", cfgPath, "--model", "from-flag"}, io.Discard, getenv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.routerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "from-flag" || c.Listen != "127.0.0.1:7001" || c.BlockSize != 32 || c.Discovery.Kubernetes == nil {
		t.Errorf("config %+v", c)
	}
	if o.limits.MaxQueue != 7 {
		t.Errorf("max queue %d from LLMD_MAX_QUEUE=7", o.limits.MaxQueue)
	}

	pods := filepath.Join(dir, "pods.jsonl")
	if err := os.WriteFile(pods, []byte(`{"pod":"sim-0","http":"http://127.0.0.1:9000","kv":"tcp://127.0.0.1:6000","replay":"tcp://127.0.0.1:6001"}
{"pod":"sim-1","http":"http://127.0.0.1:9001","kv":"tcp://127.0.0.1:6002"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseServeFlags([]string{"--pods-file", pods}, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c, err = o.routerConfig(); err != nil {
		t.Fatal(err)
	}
	want := []config.StaticPod{
		{Name: "sim-0", HTTP: "http://127.0.0.1:9000", KVEvents: "tcp://127.0.0.1:6000", Replay: "tcp://127.0.0.1:6001"},
		{Name: "sim-1", HTTP: "http://127.0.0.1:9001", KVEvents: "tcp://127.0.0.1:6002"},
	}
	if !reflect.DeepEqual(c.Discovery.Static, want) || c.Listen != config.DefaultListen {
		t.Errorf("sim pods %+v listen %q", c.Discovery.Static, c.Listen)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "discovery: set kubernetes or static"},
		{[]string{"--pods-file", pods}, map[string]string{"LLMD_MAX_QUEUE": "many"}, "LLMD_MAX_QUEUE"},
		{[]string{"--pods-file", filepath.Join(dir, "missing")}, nil, "reading pods file"},
	} {
		o, err := parseServeFlags(tc.args, io.Discard, func(k string) string { return tc.env[k] })
		if err == nil {
			_, err = o.routerConfig()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: error %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}
