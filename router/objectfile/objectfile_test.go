package objectfile

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// withS3 points the SDK's default configuration at a fresh moto_server
// through AWS_ENDPOINT_URL_S3, the variable a deployment sets for an
// S3-compatible store. AWS_ENDPOINT_URL points nowhere, so a read that
// ignored the S3-specific variable would fail.
func withS3(t *testing.T) *testenv.Moto {
	t.Helper()
	m := testenv.StartMoto(t)
	m.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_S3", m.URL)
	return m
}

func TestReadS3(t *testing.T) {
	m := withS3(t)
	want := []byte(`{"model":{"type":"BPE"}}`)
	m.PutObject(t, "weights", "qwen3/abc123/tokenizer.json", want)
	got, err := Read(t.Context(), "s3://weights/qwen3/abc123/tokenizer.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}
}

// TestReadS3MissingKey: the error names the URI and S3's answer, so the
// operator sees which object is absent rather than a bare 404.
func TestReadS3MissingKey(t *testing.T) {
	m := withS3(t)
	m.PutObject(t, "weights", "qwen3/abc123/tokenizer.json", []byte("{}"))
	uri := "s3://weights/qwen3/abc123/tokenizer_config.json"
	_, err := Read(t.Context(), uri, 1<<20)
	var nsk *s3types.NoSuchKey
	if err == nil || !strings.Contains(err.Error(), uri) || !strings.Contains(err.Error(), "S3 answered NoSuchKey") || !errors.As(err, &nsk) {
		t.Errorf("got %v, want an error naming %s and NoSuchKey", err, uri)
	}
}

// TestReadTooLarge refuses a file one byte over the limit, from S3 and from
// disk, and accepts one exactly at it.
func TestReadTooLarge(t *testing.T) {
	m := withS3(t)
	data := bytes.Repeat([]byte("x"), 1000)
	m.PutObject(t, "weights", "big", data)
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s3://weights/big", path} {
		_, err := Read(t.Context(), name, 999)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "999 bytes") {
			t.Errorf("%s over the limit: %v", name, err)
		}
		if got, err := Read(t.Context(), name, 1000); err != nil || len(got) != 1000 {
			t.Errorf("%s at the limit: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestReadMalformedURI refuses S3 URIs without a bucket or a key before
// asking S3 anything.
func TestReadMalformedURI(t *testing.T) {
	for _, uri := range []string{"s3://", "s3://bucket", "s3://bucket/", "s3:///key"} {
		_, err := Read(t.Context(), uri, 1<<20)
		if err == nil || !strings.Contains(err.Error(), "s3://bucket/key") || !strings.Contains(err.Error(), uri) {
			t.Errorf("%q: %v", uri, err)
		}
	}
}

func TestReadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(t.Context(), path, 1<<20); err != nil || string(got) != "{}" {
		t.Errorf("read %q, %v", got, err)
	}
	missing := filepath.Join(t.TempDir(), "absent.json")
	if _, err := Read(t.Context(), missing, 1<<20); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadS3Cancelled: the caller's context bounds the read.
func TestReadS3Cancelled(t *testing.T) {
	m := withS3(t)
	m.PutObject(t, "weights", "k", []byte("v"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Read(ctx, "s3://weights/k", 1<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: %v", err)
	}
}

// TestAccessDeniedNamesTheRole: moto grants every request, so the hint for
// AccessDenied is checked on the error S3 would have returned.
func TestAccessDeniedNamesTheRole(t *testing.T) {
	err := s3Error("s3://weights/qwen3/abc/tokenizer.json", "weights", "qwen3/abc/tokenizer.json",
		&smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"})
	want := "S3 answered AccessDenied: the router's Pod Identity role must allow s3:GetObject on arn:aws:s3:::weights/qwen3/abc/*"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want it to contain %q", err, want)
	}
}
