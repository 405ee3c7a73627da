// Package objectfile reads a small file named either by a local path or by an
// s3://bucket/key URI, so the router can take its tokenizer files from the
// bucket vLLM streams the model weights from (Run:ai Model Streamer) as
// readily as from a mounted volume.
//
// S3 is reached with aws-sdk-go-v2's default configuration: the region, the
// credentials (EKS Pod Identity through AWS_CONTAINER_CREDENTIALS_FULL_URI,
// IRSA, static keys) and the endpoint (AWS_ENDPOINT_URL_S3, then
// AWS_ENDPOINT_URL) all come from the environment, and failed requests are
// retried by the SDK's standard retryer. The SDK reads no path-style setting
// from the environment (only s3.Options.UsePathStyle sets it), but its S3
// endpoint rules address an endpoint given by IP address path-style, which
// is what an S3-compatible server on an IP needs; an endpoint host name gets
// virtual-hosted buckets (bucket.host), as on AWS.
package objectfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	routerconfig "github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// S3Scheme starts every name Read fetches from S3.
const S3Scheme = "s3://"

// ErrTooLarge is wrapped by Read's error for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// IsS3 reports whether name is an S3 URI rather than a local path.
func IsS3(name string) bool { return strings.HasPrefix(name, S3Scheme) }

// ParseS3 splits an s3://bucket/key URI (router/config.SplitS3URI, which
// the configuration's validation uses too); a URI without a bucket or a key
// is an error.
func ParseS3(uri string) (bucket, key string, err error) {
	bucket, key, isS3 := routerconfig.SplitS3URI(uri)
	if !isS3 {
		return "", "", fmt.Errorf("%q is not an s3:// URI", uri)
	}
	if bucket == "" || key == "" {
		return "", "", fmt.Errorf("%q is not of the form s3://bucket/key", uri)
	}
	return bucket, key, nil
}

// Read returns the contents of name, a local path or an s3://bucket/key URI.
// A file larger than limit bytes is an error wrapping ErrTooLarge. ctx
// bounds the whole read, S3 retries included.
func Read(ctx context.Context, name string, limit int64) ([]byte, error) {
	if IsS3(name) {
		return readS3(ctx, name, limit)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, name, limit)
}

func readS3(ctx context.Context, uri string, limit int64) ([]byte, error) {
	bucket, key, err := ParseS3(uri)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: loading the AWS configuration: %w", uri, err)
	}
	// Objects uploaded without a checksum (most tools' multipart uploads)
	// would otherwise log a DEBUG line on the router's stderr at every read.
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s3Error(uri, bucket, key, err)
	}
	defer out.Body.Close()
	// The length S3 announces refuses an oversized object before any of it
	// is downloaded; readBounded still holds if the body runs longer.
	if n := aws.ToInt64(out.ContentLength); n > limit {
		return nil, tooLarge(uri, limit)
	}
	return readBounded(out.Body, uri, limit)
}

// s3Error names the URI and S3's error code, with the fix for the codes an
// operator can act on.
func s3Error(uri, bucket, key string, err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("reading %s: %w", uri, err)
	}
	switch api.ErrorCode() {
	case "AccessDenied", "Forbidden":
		prefix := key[:strings.LastIndex(key, "/")+1]
		return fmt.Errorf("reading %s: S3 answered %s: the router's Pod Identity role must allow s3:GetObject on arn:aws:s3:::%s/%s*: %w",
			uri, api.ErrorCode(), bucket, prefix, err)
	default:
		return fmt.Errorf("reading %s: S3 answered %s: %w", uri, api.ErrorCode(), err)
	}
}

// readBounded reads r to its end, refusing more than limit bytes.
func readBounded(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(name, limit)
	}
	return data, nil
}

func tooLarge(name string, limit int64) error {
	return fmt.Errorf("reading %s: %w: over the limit of %d bytes", name, ErrTooLarge, limit)
}
