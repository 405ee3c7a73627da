package kvevents

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundaries keeps ZeroMQ (cgo) out of the decoder and the index,
// which the cgo-free provider binary may import, and keeps the router free of
// provider code (DESIGN.md, dependencies point one way).
func TestImportBoundaries(t *testing.T) {
	deps := func(pkgs ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	for _, d := range deps(".", "../index") {
		if strings.Contains(d, "zmq") {
			t.Errorf("decoder or index depends on %s", d)
		}
	}
	for _, d := range deps("./...", "../index") {
		if strings.HasPrefix(d, "github.com/llmd-dev/terraform-provider-llmd/provider") {
			t.Errorf("router depends on provider package %s", d)
		}
	}
}
