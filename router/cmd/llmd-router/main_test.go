package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{args: nil, wantCode: 2, wantErr: "usage: llmd-router"},
		{args: []string{"help"}, wantCode: 0, wantErr: "serve"},
		{args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate"`},
		{args: []string{"version"}, wantCode: 0, wantOut: buildinfo.Program("llmd-router") + "\n"},
		{args: []string{"serve", "--help"}, wantCode: 0, wantErr: "-listen"},
		{args: []string{"sim", "-h"}, wantCode: 0, wantErr: "-replicas"},
		{args: []string{"bench", "--help"}, wantCode: 0, wantErr: "-policies"},
		{args: []string{"sim", "--no-such-flag"}, wantCode: 1, wantErr: "flag provided but not defined"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.wantCode {
			t.Errorf("run(%q) = %d, want %d (stderr %q)", tc.args, code, tc.wantCode, stderr.String())
		}
		if tc.wantOut != "" && stdout.String() != tc.wantOut {
			t.Errorf("run(%q) stdout = %q, want %q", tc.args, stdout.String(), tc.wantOut)
		}
		if !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("run(%q) stderr = %q, want it to contain %q", tc.args, stderr.String(), tc.wantErr)
		}
	}
}
