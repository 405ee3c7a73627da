package workloads

import (
	"fmt"
	"regexp"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// S3Weights keeps the weights in an S3 bucket instead of on a volume: the
// staging Job writes each revision under its own prefix,
// s3://<Bucket>/<model path>/<commit>/, and vLLM streams it from there with
// the Run:ai Model Streamer (--load-format runai_streamer, vLLM's
// model_executor/model_loader/runai_streamer_loader.py), reading config
// and tokenizer files first into a local cache (transformers_utils/
// runai_utils.py ObjectStorageModel). The pods reach the bucket through
// the cluster's S3 gateway endpoint, with the AWS identity EKS Pod
// Identity gives their service account (ReaderServiceAccount; the staging
// Job's is WriterServiceAccount): the cluster binds both to roles whose
// policies cover only the model path's prefix.
type S3Weights struct {
	// Bucket holds the weights; Region is its region (the pods sign for it).
	Bucket, Region string
}

// s3Bucket is S3's bucket naming rule (general purpose buckets: 3-63
// lowercase letters, digits, dots and hyphens, starting and ending with a
// letter or digit; Amazon S3 User Guide, "Bucket naming rules").
var s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func (s S3Weights) validate(modelPath string) error {
	if !s3Bucket.MatchString(s.Bucket) || strings.Contains(s.Bucket, "..") {
		return fmt.Errorf("storage.s3_bucket: %q is not an S3 bucket name (3-63 lowercase letters, digits, dots and hyphens): pass llmd_inference_cluster.model_storage's bucket", s.Bucket)
	}
	if s.Region == "" {
		return fmt.Errorf("storage.s3_region: empty; the pods sign their requests for the bucket's region")
	}
	if modelPath == "" || strings.HasPrefix(modelPath, "/") || strings.Contains(modelPath, "..") {
		return fmt.Errorf("model.path: %q must be a relative key prefix in the bucket (e.g. \"qwen2.5-7b-instruct\") with S3 weights", modelPath)
	}
	return nil
}

// S3URI is the served revision's prefix, s3://bucket/<served path>, the
// model vLLM is given.
func (f Fleet) S3URI() string {
	return "s3://" + f.Storage.S3.Bucket + "/" + f.ServedPath()
}

// S3Prefix is the key prefix the fleet's revisions live under (model.path
// and every commit below it): what the reader's and the writer's policies
// cover.
func (f Fleet) S3Prefix() string { return strings.TrimSuffix(f.ModelPath, "/") + "/" }

// ReaderServiceAccount is the service account of the fleet's pods, which
// read the weights; WriterServiceAccount is the staging Job's, which
// writes them. Only the latter may write: a pod that serves never can.
func (f Fleet) ReaderServiceAccount() string { return f.Name + "-weights-reader" }

// WriterServiceAccount: see ReaderServiceAccount.
func (f Fleet) WriterServiceAccount() string { return f.Name + "-weights-writer" }

// s3StagingScript stages one revision into the bucket file by file, so the
// Job's disk holds one file at a time (a 7B model's shards are ~4 GB each,
// its whole revision ~15 GB): a file already in the bucket at the Hub's
// size is kept, so a replaced Job goes on where the failed one stopped;
// the marker object is written last, and a revision with its marker is
// never written again. Inputs come as environment variables. A failure
// ends with one line naming the Hub's or S3's answer, the line the apply
// quotes.
const s3StagingScript = `import os, sys, tempfile
import boto3
from botocore.exceptions import ClientError
from huggingface_hub import HfApi, hf_hub_download

repo, rev = os.environ["REPO"], os.environ["REVISION"]
bucket, prefix = os.environ["BUCKET"], os.environ["PREFIX"].rstrip("/") + "/"
token = os.environ.get("HF_TOKEN") or None
marker = prefix + ".llmd-staged"
where = "s3://%s/%s" % (bucket, prefix)

def fail(what):
    print("llmd: staging %s@%s into %s failed: %s" % (repo, rev, where, " ".join(str(what).split())), file=sys.stderr)
    sys.exit(1)

def s3_error(e, key):
    code = e.response.get("Error", {}).get("Code", "")
    hint = ""
    if code in ("AccessDenied", "403", "AllAccessDisabled"):
        hint = " (the staging Job's Pod Identity role must allow s3:PutObject and s3:GetObject on %s*)" % where
    fail("S3 answered %s for s3://%s/%s: %s%s" % (code, bucket, key, e, hint))

def size_in_bucket(s3, key):
    try:
        return s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        s3_error(e, key)

def main():
    s3 = boto3.client("s3")
    if size_in_bucket(s3, marker) is not None:
        print("llmd: %s@%s already staged in %s" % (repo, rev, where))
        return
    try:
        info = HfApi().model_info(repo, revision=rev, files_metadata=True, token=token)
    except Exception as e:
        r = getattr(e, "response", None)
        if r is None:
            fail("%s: %s" % (type(e).__name__, e))
        reason = getattr(r, "reason", None) or getattr(r, "reason_phrase", "")
        hint = " (a gated or private model needs hf_token from an account granted access)" if r.status_code in (401, 403) else ""
        fail("%s: Hugging Face answered %s %s for %s: %s%s" % (type(e).__name__, r.status_code, reason, r.url, e, hint))
    print("llmd: staging %s@%s into %s (%d files)" % (repo, rev, where, len(info.siblings)))
    with tempfile.TemporaryDirectory(dir=os.environ.get("SCRATCH")) as scratch:
        for f in info.siblings:
            key = prefix + f.rfilename
            if f.size is not None and size_in_bucket(s3, key) == f.size:
                continue
            try:
                local = hf_hub_download(repo, f.rfilename, revision=rev, local_dir=scratch, token=token)
            except Exception as e:
                fail("downloading %s: %s: %s" % (f.rfilename, type(e).__name__, e))
            try:
                s3.upload_file(local, bucket, key)
            except ClientError as e:
                s3_error(e, key)
            except boto3.exceptions.S3UploadFailedError as e:
                fail("S3 refused the upload of s3://%s/%s: %s" % (bucket, key, e))
            os.remove(local)
    try:
        s3.put_object(Bucket=bucket, Key=marker, Body=rev.encode())
    except ClientError as e:
        s3_error(e, marker)
    print("llmd: staged %s@%s into %s" % (repo, rev, where))

main()
`

// s3StagingTemplate is the staging Job's pod for S3 weights: the script
// above under the writer's service account, with a scratch directory for
// the file in transit.
func (f Fleet) s3StagingTemplate(labels map[string]string) *corev1ac.PodTemplateSpecApplyConfiguration {
	env := f.stagingEnv(
		corev1ac.EnvVar().WithName("BUCKET").WithValue(f.Storage.S3.Bucket),
		corev1ac.EnvVar().WithName("PREFIX").WithValue(f.ServedPath()),
		corev1ac.EnvVar().WithName("AWS_REGION").WithValue(f.Storage.S3.Region),
		corev1ac.EnvVar().WithName("SCRATCH").WithValue("/scratch"))
	pod := f.stagingPod(corev1ac.Container().WithName("stage").WithImage(f.Staging.Image).
		WithCommand("python3", "-c", s3StagingScript).WithEnv(env...).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("scratch").WithMountPath("/scratch"))).
		WithServiceAccountName(f.WriterServiceAccount()).
		WithVolumes(corev1ac.Volume().WithName("scratch").WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	return corev1ac.PodTemplateSpec().WithLabels(stagingLabels(labels)).WithSpec(pod)
}

// s3ServiceAccounts are the reader's and the writer's service accounts
// (no token mounted: EKS Pod Identity's agent authenticates the pod with a
// token of its own audience, which EKS projects into the pod itself).
func (f Fleet) s3ServiceAccounts(labels map[string]string) []any {
	var out []any
	for _, name := range []string{f.ReaderServiceAccount(), f.WriterServiceAccount()} {
		out = append(out, corev1ac.ServiceAccount(name, f.Namespace).WithLabels(labels).WithAutomountServiceAccountToken(false))
	}
	return out
}

// s3TokenizerPaths are the served revision's tokenizer files in the bucket.
func (f Fleet) s3TokenizerPaths() (json, config string) {
	return f.S3URI() + "/tokenizer.json", f.S3URI() + "/tokenizer_config.json"
}
