package addons

import (
	"os"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestMain stops the parts internal/testenv started (the control plane).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
