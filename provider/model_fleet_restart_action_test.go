package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestRestartTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": defaultRestartTimeout, "45m": 45 * time.Minute, "1h30m": 90 * time.Minute} {
		v := types.StringValue(in)
		if in == "" {
			v = types.StringNull()
		}
		if got, err := restartTimeout(v); err != nil || got != want {
			t.Errorf("timeout %q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"45", "-5m", "0s", "soon"} {
		if _, err := restartTimeout(types.StringValue(bad)); err == nil || !strings.Contains(err.Error(), "timeout: ") {
			t.Errorf("timeout %q: error %v, want one naming timeout", bad, err)
		}
	}
}
