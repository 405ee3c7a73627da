package testenv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PutObject stores data at s3://bucket/key in moto, creating the bucket on
// first use. It configures its own client, so the code under test is the
// only reader of the environment.
func (m *Moto) PutObject(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	c := s3.New(s3.Options{Region: Region, BaseEndpoint: aws.String(m.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
	_, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(Region)}})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		t.Fatalf("testenv: creating bucket %s: %v", bucket, err)
	}
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("testenv: putting s3://%s/%s: %v", bucket, key, err)
	}
}
