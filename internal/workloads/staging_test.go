package workloads

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	testCommit  = "a09a35458c702b33eeacc393d103063234e8bc28"
	otherCommit = "bb46c15ee4bb56c5b63245ef50fd7637234d6f75"
)

// TestParseSourceWantsACommit: only a full commit SHA is a revision.
func TestParseSourceWantsACommit(t *testing.T) {
	repo, rev, err := ParseSource("hf://Qwen/Qwen2.5-7B-Instruct@" + testCommit)
	if err != nil || repo != "Qwen/Qwen2.5-7B-Instruct" || rev != testCommit {
		t.Fatalf("%q %q %v", repo, rev, err)
	}
	for _, bad := range []string{"hf://Qwen/Qwen2.5-7B-Instruct@main", "hf://Qwen/Qwen2.5-7B-Instruct@v1.0", "hf://Qwen/Qwen2.5-7B-Instruct@a09a3545",
		"hf://Qwen/Qwen2.5-7B-Instruct@" + strings.ToUpper(testCommit)} {
		if _, _, err := ParseSource(bad); err == nil || !strings.Contains(err.Error(), "40-hex commit") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func stagedFleet(image, commit string) Fleet {
	f := testFleet()
	f.Staging = &Staging{Repo: "Qwen/Qwen2.5-7B-Instruct", Revision: commit, Image: image, NodeSelector: map[string]string{"llmd.dev/pool": "system"}}
	f.NodeSelector = map[string]string{"llmd.dev/pool": "gpu"}
	f.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return f
}

// TestStagingJobShape: the Job runs off the GPU nodes with requests and no
// GPU, has a deadline, downloads into <path>/<commit>, and its name follows
// its (immutable) pod template, so a new image is a new Job.
func TestStagingJobShape(t *testing.T) {
	f := stagedFleet("vllm/vllm-openai:v0.30.0", testCommit)
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	find(t, objs, "Job", "llmd", f.StagingJobName(), &job)
	pod := job.Spec.Template.Spec
	if pod.NodeSelector["llmd.dev/pool"] != "system" || len(pod.Tolerations) != 0 {
		t.Errorf("staging Job placed by %v, tolerating %v: want the system nodes", pod.NodeSelector, pod.Tolerations)
	}
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["NVIDIA_VISIBLE_DEVICES"] != "void" || env["TARGET"] != "/models/Qwen2.5-7B-Instruct/"+testCommit || env["ROOT"] != "/models/Qwen2.5-7B-Instruct" {
		t.Errorf("staging env %v", env)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("staging requests %v", c.Resources.Requests)
	}
	if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != StagingDeadline {
		t.Errorf("activeDeadlineSeconds %v", job.Spec.ActiveDeadlineSeconds)
	}
	if stagedFleet("vllm/vllm-openai:v0.30.1", testCommit).StagingJobName() == f.StagingJobName() {
		t.Error("a new staging image keeps the Job's name: its template cannot be updated")
	}
	if f.Target().TokenizerPath != "Qwen2.5-7B-Instruct/"+testCommit+"/tokenizer.json" || f.Target().ModelPath != "Qwen2.5-7B-Instruct/"+testCommit {
		t.Errorf("router target %+v", f.Target())
	}
	unstaged := testFleet()
	if unstaged.Target().TokenizerPath != "Qwen2.5-7B-Instruct/tokenizer.json" {
		t.Errorf("a fleet without model.source moved its tokenizer: %s", unstaged.Target().TokenizerPath)
	}
}

// runStaging runs the staging script under /bin/sh with python3 finding a
// stand-in huggingface_hub first (an in-process fake, named as such: its
// snapshot_download writes one file, or raises what the real one raises
// for an HTTP error, an exception with the Hub's response attached).
func runStaging(t *testing.T, root, commit, fake string) (string, error) {
	t.Helper()
	mod := filepath.Join(t.TempDir(), "huggingface_hub")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "__init__.py"), []byte(fake), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", stagingScript)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Dir(mod), "REPO=Qwen/Qwen2.5-7B-Instruct", "REVISION="+commit,
		"ROOT="+root, "TARGET="+filepath.Join(root, commit), "DOWNLOAD="+stagingDownload)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const fakeHubWrites = `import os
def snapshot_download(repo_id, revision, local_dir, token=None):
    with open(os.path.join(local_dir, "config.json"), "a") as f:
        f.write(revision + "\n")
`

const fakeHubRefuses = `class _Response:
    status_code, reason, url = 401, "Unauthorized", "https://huggingface.co/api/models/Qwen/Qwen2.5-7B-Instruct/revision/x"
class GatedRepoError(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.response = _Response()
def snapshot_download(repo_id, revision, local_dir, token=None):
    raise GatedRepoError("401 Client Error.\nCannot access gated repo")
`

// TestStagingScript: a commit is downloaded once into its own directory; a
// second commit lands beside it; a commit staged by an earlier provider in
// model.path itself is linked, not downloaded again; a refusal ends with
// one line naming the Hub's answer.
func TestStagingScript(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3: %v", err)
	}
	root := t.TempDir()
	for range 2 {
		if out, err := runStaging(t, root, testCommit, fakeHubWrites); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, testCommit, "config.json"))
	if err != nil || string(b) != testCommit+"\n" {
		t.Errorf("after two runs config.json is %q (%v), want one download", b, err)
	}
	if out, err := runStaging(t, root, otherCommit, fakeHubWrites); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, testCommit, "config.json")); err != nil || string(b) != testCommit+"\n" {
		t.Errorf("a second commit changed the first one's files: %q %v", b, err)
	}

	legacy := t.TempDir()
	if err := os.WriteFile(filepath.Join(legacy, "config.json"), []byte("legacy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, ".llmd-staged-"+testCommit), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runStaging(t, legacy, testCommit, fakeHubRefuses)
	if err != nil {
		t.Fatalf("a commit staged under the old layout is downloaded again: %v: %s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(legacy, testCommit, "config.json")); err != nil || string(b) != "legacy\n" {
		t.Errorf("the old layout's files are not served from <path>/<commit>: %q %v", b, err)
	}

	out, err = runStaging(t, t.TempDir(), testCommit, fakeHubRefuses)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if err == nil || !strings.Contains(last, "Hugging Face answered 401 Unauthorized for https://huggingface.co/api/models/Qwen") ||
		!strings.Contains(last, "GatedRepoError") || !strings.Contains(last, "hf_token") {
		t.Errorf("a refused download ends with %q (%v)", last, err)
	}
}
