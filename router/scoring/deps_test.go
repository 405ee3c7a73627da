package scoring_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundaries keeps the scorers, the config schema and discovery
// free of cgo (ZeroMQ: the transport is injected) and of provider and
// internal code: the provider links router/config, and the virtual-time
// simulator and the benchmark link scoring.
func TestImportBoundaries(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".", "../config", "../discovery")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps with CGO_ENABLED=0: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %v", deps)
	}
	for _, d := range deps {
		if strings.Contains(d, "zmq") || strings.HasPrefix(d, "github.com/llmd-dev/terraform-provider-llmd/provider") ||
			strings.HasPrefix(d, "github.com/llmd-dev/terraform-provider-llmd/internal/") {
			t.Errorf("scoring, config or discovery depends on %s", d)
		}
	}
}
