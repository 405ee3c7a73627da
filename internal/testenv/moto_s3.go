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

// S3Client is an S3 client on moto in Region with the test credentials. It
// configures itself, so the code under test is the only reader of the
// environment.
func (m *Moto) S3Client() *s3.Client {
	return s3.New(s3.Options{Region: Region, BaseEndpoint: aws.String(m.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// CreateBucket makes bucket in moto, in Region; one that exists already is fine.
func (m *Moto) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	_, err := m.S3Client().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(Region)}})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		t.Fatalf("testenv: creating bucket %s: %v", bucket, err)
	}
}

// PutObject stores data at s3://bucket/key in moto, creating the bucket on
// first use.
func (m *Moto) PutObject(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	m.CreateBucket(t, bucket)
	if _, err := m.S3Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("testenv: putting s3://%s/%s: %v", bucket, key, err)
	}
}
