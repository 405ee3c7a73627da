package buildinfo

import (
	"strings"
	"testing"
)

func TestProviderSaysWhatItPins(t *testing.T) {
	defer func(v, img string) { Version, RouterImage = v, img }(Version, RouterImage)

	Version, RouterImage = "dev", ""
	if got := Provider(); !strings.Contains(got, "terraform-provider-llmd dev (") || !strings.Contains(got, "router image: none pinned (development build)") {
		t.Errorf("development build says %q", got)
	}
	Version, RouterImage = "0.1.0", ImageRepository+":0.1.0@sha256:"+strings.Repeat("ab", 32)
	if got := Provider(); !strings.Contains(got, "terraform-provider-llmd 0.1.0 (") || !strings.HasSuffix(got, "\nrouter image: "+RouterImage) {
		t.Errorf("release build says %q", got)
	}
}
