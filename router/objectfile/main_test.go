package objectfile

import (
	"os"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
