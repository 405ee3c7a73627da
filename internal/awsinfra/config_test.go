package awsinfra

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// TestRetryAttempts checks the attempts per call each retry setting gives:
// retry_mode alone keeps the SDK's default (retry.DefaultMaxAttempts, 3),
// max_retries sets the count in either mode.
func TestRetryAttempts(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	cases := []struct {
		mode       string
		maxRetries int
		want       int
	}{
		{"", 0, retry.DefaultMaxAttempts},
		{"standard", 0, retry.DefaultMaxAttempts},
		{"adaptive", 0, retry.DefaultMaxAttempts},
		{"", 5, 5},
		{"standard", 1, 1},
		{"adaptive", 7, 7},
	}
	for _, tc := range cases {
		s := Settings{Region: "us-west-2", RetryMode: tc.mode, MaxRetries: tc.maxRetries}
		cfg, err := LoadConfig(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		// The retryer a client actually uses, after the SDK's own defaults.
		if got := NewClients(cfg, s).EKS.Options().Retryer.MaxAttempts(); got != tc.want {
			t.Errorf("retry_mode %q, max_retries %d: %d attempts per call, want %d", tc.mode, tc.maxRetries, got, tc.want)
		}
	}
}
