package vllmcontract

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// hubFromDir is an in-process fake of huggingface_hub (named as such: no
// Hub is reachable here) serving one directory, $FAKE_HUB_DIR, as every
// revision of every repository: what the staging Job's script calls of it
// (HfApi.model_info with files_metadata, hf_hub_download).
const hubFromDir = `import os, shutil
class _Sibling:
    def __init__(self, name, size):
        self.rfilename, self.size = name, size
class _Info:
    pass
def _dir():
    return os.environ["FAKE_HUB_DIR"]
class HfApi:
    def model_info(self, repo, revision=None, files_metadata=False, token=None):
        i = _Info()
        i.siblings = [_Sibling(n, os.path.getsize(os.path.join(_dir(), n))) for n in sorted(os.listdir(_dir())) if not n.startswith(".")]
        return i
def hf_hub_download(repo, filename, revision=None, local_dir=None, token=None):
    p = os.path.join(local_dir, filename)
    shutil.copyfile(os.path.join(_dir(), filename), p)
    return p
`

// TestEngineStreamsWeightsFromS3 stages the tiny model into moto's S3 with
// the fleet's own staging Job (its script and environment as rendered, run
// by the engine's Python with the real boto3; the Hub faked), then starts a
// real engine with the fleet's arguments for S3 weights: it must stream the
// revision from the bucket with the Run:ai Model Streamer, tokenizer files
// included, and serve. The tiny model's local directory is nowhere in the
// engine's arguments, so an answer proves the weights came from S3.
func TestEngineStreamsWeightsFromS3(t *testing.T) {
	inst := testenv.VLLM(t)
	moto := testenv.StartMoto(t)
	moto.CreateBucket(t, "tiny-weights")

	f := testFleet()
	f.Storage = workloads.Storage{S3: &workloads.S3Weights{Bucket: "tiny-weights", Region: "us-west-2"}}
	f.Staging = &workloads.Staging{Repo: "llmd/tiny", Revision: strings.Repeat("a", 40), Image: "vllm/vllm-openai:v" + testenv.VLLMVersion}
	f.Resources = workloads.Resources{CPU: "1", Memory: "4Gi", MemoryLimit: "6Gi", Shm: "1Gi"} // for the objects; the engine runs here
	f.Rollout.StartupSeconds = 600
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	for _, o := range objs {
		if o.Kind == "Job" {
			if err := o.Into(&job); err != nil {
				t.Fatal(err)
			}
		}
	}
	if job.Name == "" {
		t.Fatal("the fleet rendered no staging Job")
	}
	c := job.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 3 || c.Command[0] != "python3" {
		t.Fatalf("staging Job command %q", c.Command)
	}
	hub := filepath.Join(t.TempDir(), "huggingface_hub")
	if err := os.MkdirAll(hub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hub, "__init__.py"), []byte(hubFromDir), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(inst.Python, c.Command[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Dir(hub), "FAKE_HUB_DIR="+inst.Model,
		"AWS_ENDPOINT_URL="+moto.URL, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing")
	for _, e := range c.Env {
		if e.Name == "SCRATCH" {
			e.Value = t.TempDir()
		}
		if e.ValueFrom == nil {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the staging Job's script: %v\n%s", err, out)
	}

	e := testenv.StartEngine(t, testenv.EngineOptions{Args: mustArgs(t, f), Env: f.VLLM.Env, S3: moto})
	if a := e.Args(); !strings.HasPrefix(a[0], "s3://tiny-weights/tiny/") || strings.Contains(strings.Join(a, " "), inst.Model) {
		t.Fatalf("engine args %q: the model must be the bucket's prefix alone", a)
	}
	body := fmt.Sprintf(`{"model":%q,"prompt":"The weights came from","max_tokens":8,"temperature":0}`, servedName)
	resp, err := http.Post(e.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Choices) != 1 || out.Usage.CompletionTokens != 8 {
		t.Fatalf("completion from the S3-loaded engine: %d %s\n%s", resp.StatusCode, b, e.LogTail(30))
	}
	if !strings.Contains(e.LogTail(400), "Runai Model Streamer") {
		t.Errorf("the engine's log does not show the Run:ai Model Streamer loading:\n%s", e.LogTail(60))
	}
}

func mustArgs(t *testing.T, f workloads.Fleet) []string {
	t.Helper()
	args, err := f.Args()
	if err != nil {
		t.Fatal(err)
	}
	return args
}
