package workloads

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

func s3Fleet() Fleet {
	f := stagedFleet("vllm/vllm-openai:v0.30.0", testCommit)
	f.ModelPath = "qwen2.5-7b-instruct"
	f.Storage = Storage{S3: &S3Weights{Bucket: "acme-weights", Region: "us-west-2"}}
	return f
}

// TestS3WeightsObjects: with S3 weights the fleet has no volume; its pods
// stream the revision's prefix under a reader service account, its staging
// Job writes it under a writer one, and the router is told the tokenizer's
// URIs in the bucket.
func TestS3WeightsObjects(t *testing.T) {
	f := s3Fleet()
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if k := o.Kind; k == "PersistentVolume" || k == "PersistentVolumeClaim" {
			t.Errorf("S3 weights made a %s %s", k, o.Name)
		}
	}
	for _, name := range []string{"qwen-weights-reader", "qwen-weights-writer"} {
		var sa corev1.ServiceAccount
		find(t, objs, "ServiceAccount", "llmd", name, &sa)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("service account %s mounts the API token; Pod Identity needs none", name)
		}
	}
	var d appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "qwen", &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	uri := "s3://acme-weights/qwen2.5-7b-instruct/" + testCommit
	if pod.ServiceAccountName != "qwen-weights-reader" || c.Args[0] != uri {
		t.Errorf("pods run as %q serving %q, want qwen-weights-reader and %s", pod.ServiceAccountName, c.Args[0], uri)
	}
	if i := slices.Index(c.Args, "--load-format"); i < 0 || c.Args[i+1] != "runai_streamer" {
		t.Errorf("args %v do not stream with the Run:ai Model Streamer", c.Args)
	}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("pods mount claim %s with S3 weights", v.PersistentVolumeClaim.ClaimName)
		}
	}
	if env := envOf(c); env["AWS_REGION"] != "us-west-2" {
		t.Errorf("pod env %v lacks the bucket's region", env)
	}

	var job batchv1.Job
	find(t, objs, "Job", "llmd", f.StagingJobName(), &job)
	jp := job.Spec.Template.Spec
	env := envOf(jp.Containers[0])
	if jp.ServiceAccountName != "qwen-weights-writer" || env["BUCKET"] != "acme-weights" || env["PREFIX"] != "qwen2.5-7b-instruct/"+testCommit ||
		env["AWS_REGION"] != "us-west-2" || jp.Containers[0].Command[0] != "python3" {
		t.Errorf("staging Job runs %v as %q with env %v", jp.Containers[0].Command[:2], jp.ServiceAccountName, env)
	}
	if jp.NodeSelector["llmd.dev/pool"] != "system" || jp.Containers[0].Resources.Requests.Cpu().IsZero() {
		t.Errorf("the S3 staging Job is not placed and sized as the volume's: %v %v", jp.NodeSelector, jp.Containers[0].Resources.Requests)
	}

	tg := f.Target()
	if tg.ClaimName != "" || tg.TokenizerPath != uri+"/tokenizer.json" || tg.TokenizerConfigPath != uri+"/tokenizer_config.json" || tg.S3Region != "us-west-2" {
		t.Errorf("router target %+v", tg)
	}
	if f.S3Prefix() != "qwen2.5-7b-instruct/" {
		t.Errorf("S3Prefix %q", f.S3Prefix())
	}
}

// TestRouterReadsTokenizerFromS3: a router in front of an S3 fleet reads
// the tokenizer files from the bucket (no claim mounted, so it may run in
// another namespace) and signs for the bucket's region.
func TestRouterReadsTokenizerFromS3(t *testing.T) {
	r := testRouter()
	r.Target = s3Fleet().Target()
	r.Namespace = "edge"
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "edge", r.Name, &cm)
	uri := "s3://acme-weights/qwen2.5-7b-instruct/" + testCommit + "/tokenizer.json"
	cfg, err := config.Parse([]byte(cm.Data[RouterConfigFile]))
	if err != nil {
		t.Fatalf("the ConfigMap's file does not load: %v", err)
	}
	if cfg.Tokenizer.JSON != uri || !strings.HasSuffix(cfg.Tokenizer.Config, "/tokenizer_config.json") {
		t.Errorf("router reads tokenizer %+v, want %s", cfg.Tokenizer, uri)
	}
	var d appsv1.Deployment
	find(t, objs, "Deployment", "edge", r.Name, &d)
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("router mounts claim %s for tokenizer files in S3", v.PersistentVolumeClaim.ClaimName)
		}
	}
	if env := envOf(d.Spec.Template.Spec.Containers[0]); env["AWS_REGION"] != "us-west-2" {
		t.Errorf("router env %v lacks the bucket's region", env)
	}
	r.Target.S3Region = ""
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "s3_region") {
		t.Errorf("a tokenizer in S3 without a region: %v", err)
	}
}

// TestS3WeightsValidate: each mistake names its attribute.
func TestS3WeightsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Fleet)
		want string
	}{
		{"bucket", func(f *Fleet) { f.Storage.S3.Bucket = "Acme_Weights" }, "storage.s3_bucket"},
		{"region", func(f *Fleet) { f.Storage.S3.Region = "" }, "storage.s3_region"},
		{"absolute path", func(f *Fleet) { f.ModelPath = "/models/qwen" }, "model.path"},
		{"two kinds", func(f *Fleet) { f.Storage.FileSystemID = "fs-0123456789abcdef0" }, "one of s3_bucket"},
		{"load format", func(f *Fleet) { f.VLLM.ExtraArgs = []string{"--load-format=safetensors"} }, "runai_streamer"},
	} {
		f := s3Fleet()
		c.edit(&f)
		if err := f.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// fakeHubFiles is an in-process fake of huggingface_hub (named as such:
// no Hub is reachable here): a revision of two files, each download logged
// to $FAKE_HUB_LOG; FAKE_HUB_REFUSE makes model_info raise what the real
// one raises for a 401, an exception carrying the Hub's response.
const fakeHubFiles = `import os
class _Sibling:
    def __init__(self, name, size):
        self.rfilename, self.size = name, size
class _Info:
    pass
FILES = {"config.json": b'{"model_type": "qwen2"}', "model-00001-of-00001.safetensors": b"w" * 70000}
class _Response:
    status_code, reason, url = 401, "Unauthorized", "https://huggingface.co/api/models/Qwen/Qwen2.5-7B-Instruct/revision/x"
class GatedRepoError(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.response = _Response()
class HfApi:
    def model_info(self, repo, revision=None, files_metadata=False, token=None):
        if os.environ.get("FAKE_HUB_REFUSE"):
            raise GatedRepoError("401 Client Error. Cannot access gated repo")
        i = _Info()
        i.siblings = [_Sibling(n, len(b)) for n, b in FILES.items()]
        return i
def hf_hub_download(repo, filename, revision=None, local_dir=None, token=None):
    with open(os.environ["FAKE_HUB_LOG"], "a") as log:
        log.write(revision + " " + filename + "\n")
    p = os.path.join(local_dir, filename)
    with open(p, "wb") as f:
        f.write(FILES[filename])
    return p
`

// TestS3StagingScript runs the S3 staging script with Python and boto3
// against moto's S3 (real), the Hub faked: a revision is written under its
// own prefix with its marker last, a staged revision is never downloaded
// again, a Job replaced mid-way uploads only what is missing, a second
// revision lands beside the first, and refusals end with one line naming
// the Hub's or S3's answer.
func TestS3StagingScript(t *testing.T) {
	if _, err := exec.Command("python3", "-c", "import boto3").CombinedOutput(); err != nil {
		t.Fatalf("python3 with boto3 (moto's own dependency, make deps): %v", err)
	}
	moto := testenv.StartMoto(t)
	ctx := context.Background()
	client := moto.S3Client()
	moto.CreateBucket(t, "acme-weights")
	hub := filepath.Join(t.TempDir(), "huggingface_hub")
	if err := os.MkdirAll(hub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hub, "__init__.py"), []byte(fakeHubFiles), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "downloads")
	run := func(bucket, commit string, extra ...string) (string, error) {
		cmd := exec.Command("python3", "-c", s3StagingScript)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Dir(hub), "FAKE_HUB_LOG="+log, "REPO=Qwen/Qwen2.5-7B-Instruct",
			"REVISION="+commit, "BUCKET="+bucket, "PREFIX=qwen/"+commit, "SCRATCH="+t.TempDir(),
			"AWS_ENDPOINT_URL="+moto.URL, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_REGION=us-west-2")
		cmd.Env = append(cmd.Env, extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	downloads := func() []string {
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return strings.Fields(strings.ReplaceAll(string(b), "\n", " "))
	}
	keys := func() []string {
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("acme-weights")})
		if err != nil {
			t.Fatal(err)
		}
		var k []string
		for _, o := range out.Contents {
			k = append(k, aws.ToString(o.Key))
		}
		return k
	}

	if out, err := run("acme-weights", testCommit); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []string{"qwen/" + testCommit + "/.llmd-staged", "qwen/" + testCommit + "/config.json", "qwen/" + testCommit + "/model-00001-of-00001.safetensors"}
	if got := keys(); !slices.Equal(got, want) {
		t.Errorf("bucket holds %v, want %v", got, want)
	}
	if d := downloads(); len(d) != 4 {
		t.Errorf("first run downloaded %v, want both files", d)
	}
	if out, err := run("acme-weights", testCommit); err != nil || !strings.Contains(out, "already staged") {
		t.Errorf("a staged revision ran again: %v: %s", err, out)
	}
	if d := downloads(); len(d) != 0 {
		t.Errorf("a staged revision was downloaded again: %v", d)
	}

	// A Job that died after one file: only the other is fetched.
	for _, k := range []string{"qwen/" + testCommit + "/.llmd-staged", "qwen/" + testCommit + "/config.json"} {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("acme-weights"), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run("acme-weights", testCommit); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if d := downloads(); !slices.Equal(d, []string{testCommit, "config.json"}) {
		t.Errorf("a resumed staging downloaded %v, want config.json alone", d)
	}
	if out, err := run("acme-weights", otherCommit); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := keys(); len(got) != 6 || !slices.Contains(got, "qwen/"+testCommit+"/.llmd-staged") {
		t.Errorf("a second revision did not land beside the first: %v", got)
	}

	lastLine := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	out, err := run("no-such-bucket", testCommit)
	if l := lastLine(out); err == nil || !strings.Contains(l, "NoSuchBucket") || !strings.Contains(l, "s3://no-such-bucket/qwen/"+testCommit) {
		t.Errorf("a missing bucket ends with %q (%v)", l, err)
	}
	out, err = run("acme-weights", strings.Repeat("c", 40), "FAKE_HUB_REFUSE=1")
	if l := lastLine(out); err == nil || !strings.Contains(l, "Hugging Face answered 401 Unauthorized") || !strings.Contains(l, "hf_token") {
		t.Errorf("a refused revision ends with %q (%v)", l, err)
	}
}
