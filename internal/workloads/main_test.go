package workloads

import (
	"os"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestMain stops what the tests started (moto's S3 for the staging script).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
