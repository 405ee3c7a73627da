package image

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
)

func TestWriteRejectsAVersionThatIsNoTag(t *testing.T) {
	_, err := Write(t.TempDir(), empty.Index, "ghcr.io/llmd-dev/llmd-router", "1.0.0+build.5")
	if err == nil || !strings.Contains(err.Error(), "the version must be a valid tag") {
		t.Fatalf("Write with version 1.0.0+build.5: %v, want an error saying the version must be a valid tag", err)
	}
}
