package main

import (
	"os"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
