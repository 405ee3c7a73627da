package workloads

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// Staging fills the volume with the weights before the fleet rolls out: a
// Job downloads a pinned Hugging Face commit into its own directory,
// <model path>/<commit>, and leaves a marker there, so a Job run again
// (recreated, retried, a new image) finds the marker and exits at once, and
// a new commit lands beside the one the running pods read, never over it.
type Staging struct {
	// Repo and Revision are the Hub's "Org/Model" and a 40-hex commit.
	Repo, Revision string
	// Image runs the download (huggingface_hub must be in it; vLLM's image has it).
	Image string
	// NodeSelector and Tolerations place the Job: off the GPU nodes (the
	// system node group on an llmd cluster; untainted nodes elsewhere).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// StagingDeadline bounds one staging Job (activeDeadlineSeconds): a 70B
// model's 140 GB at a modest 50 MB/s takes under an hour; a stalled
// download fails with the Job's DeadlineExceeded instead of hanging the apply.
const StagingDeadline = 3 * 60 * 60

var hfSource = regexp.MustCompile(`^hf://([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)@([^@/]+)$`)

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ParseSource reads model.source ("hf://Org/Model@<40-hex commit>"). A
// branch or tag is refused: it moves, and a staged directory is never
// refreshed, so the fleet would keep the old files under a new name.
func ParseSource(source string) (repo, revision string, err error) {
	m := hfSource.FindStringSubmatch(source)
	if m == nil {
		return "", "", fmt.Errorf("model.source: %q is not hf://<org>/<model>@<commit>, e.g. hf://Qwen/Qwen2.5-7B-Instruct@a09a35458c702b33eeacc393d103063234e8bc28", source)
	}
	if !commitSHA.MatchString(m[2]) {
		return "", "", fmt.Errorf("model.source: revision %q is not a commit; pin the full 40-hex commit SHA (the model's \"Files and versions\" history on the Hub): "+
			"a branch or tag moves, and a staged revision is never downloaded again", m[2])
	}
	return m[1], m[2], nil
}

// ServedPath is the model's directory on the volume, relative to its root:
// the staged commit's own directory, or model.path as given without staging.
func (f Fleet) ServedPath() string {
	if f.Staging != nil {
		return path.Join(f.ModelPath, f.Staging.Revision)
	}
	return f.ModelPath
}

// StagingJobName is the Job's name. It carries a digest of the Job's pod
// template, which Kubernetes never lets change: a new image, placement or
// source is a new Job (the old one pruned), never a refused update.
func (f Fleet) StagingJobName() string {
	b, _ := json.Marshal(f.stagingTemplate(f.Labels())) // apply configurations: plain structs, cannot fail
	sum := sha256.Sum256(b)
	return f.Name + "-stage-" + hex.EncodeToString(sum[:])[:8]
}

// StagingSelector picks the fleet's staging Jobs, the current one and any it superseded.
func (f Fleet) StagingSelector() string {
	return selectorString(map[string]string{"llmd.dev/fleet": f.Name, "app.kubernetes.io/component": "weight-staging"})
}

// TokenSecretName is the Secret holding the Hub token for the staging Job.
func (f Fleet) TokenSecretName() string { return f.Name + "-hf-token" }

// stagingScript downloads into TARGET (ROOT/REVISION) unless the marker of
// this revision is there, then writes the marker. Inputs come as
// environment variables, never spliced into the script.
//
// Providers before <path>/<revision> staged into ROOT itself, with the
// marker ROOT/.llmd-staged-REVISION; such a revision is linked in place
// (TARGET -> ROOT) instead of downloaded again.
//
// snapshot_download into local_dir keeps its metadata under
// local_dir/.cache/huggingface and skips files that finished before a
// failure, so a replaced Job goes on where the failed one stopped (a file
// cut mid-way may start over: huggingface/huggingface_hub#4196). A failure
// ends with one line naming the Hub's answer, the line the apply quotes.
const stagingScript = `set -eu
if [ ! -e "$TARGET" ] && [ -f "$ROOT/.llmd-staged-$REVISION" ]; then
  ln -s . "$TARGET"
  echo "llmd: $REPO@$REVISION was staged in $ROOT by an earlier provider; $TARGET points there"
fi
marker="$TARGET/.llmd-staged-$REVISION"
if [ -f "$marker" ]; then echo "llmd: $REPO@$REVISION already staged in $TARGET"; exit 0; fi
mkdir -p "$TARGET"
echo "llmd: downloading $REPO@$REVISION into $TARGET"
python3 -c "$DOWNLOAD"
touch "$marker"
echo "llmd: staged $REPO@$REVISION"
`

// stagingDownload is the Python the script runs: huggingface_hub's errors
// carry the Hub's HTTP response (HfHubHTTPError.response), whose status and
// URL the last line names.
const stagingDownload = `import os, sys
from huggingface_hub import snapshot_download
repo, rev = os.environ["REPO"], os.environ["REVISION"]
try:
    snapshot_download(repo_id=repo, revision=rev, local_dir=os.environ["TARGET"], token=os.environ.get("HF_TOKEN") or None)
except Exception as e:
    what = " ".join(str(e).split())
    r = getattr(e, "response", None)
    hint = ""
    if r is not None:
        reason = getattr(r, "reason", None) or getattr(r, "reason_phrase", "")
        what = "Hugging Face answered %s %s for %s: %s" % (r.status_code, reason, r.url, what)
        if r.status_code in (401, 403):
            hint = " (a gated or private model needs hf_token from an account granted access)"
    print("llmd: staging %s@%s failed: %s: %s%s" % (repo, rev, type(e).__name__, what, hint), file=sys.stderr)
    sys.exit(1)
`

func (f Fleet) stagingTemplate(labels map[string]string) *corev1ac.PodTemplateSpecApplyConfiguration {
	if f.Storage.S3 != nil {
		return f.s3StagingTemplate(labels)
	}
	root := path.Join(MountPath, f.ModelPath)
	env := f.stagingEnv(
		corev1ac.EnvVar().WithName("ROOT").WithValue(root),
		corev1ac.EnvVar().WithName("TARGET").WithValue(path.Join(MountPath, f.ServedPath())),
		corev1ac.EnvVar().WithName("DOWNLOAD").WithValue(stagingDownload))
	pod := f.stagingPod(corev1ac.Container().WithName("stage").WithImage(f.Staging.Image).
		WithCommand("/bin/sh", "-c", stagingScript).WithEnv(env...).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("weights").WithMountPath(MountPath))).
		WithVolumes(corev1ac.Volume().WithName("weights").WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(f.ClaimName())))
	return corev1ac.PodTemplateSpec().WithLabels(stagingLabels(labels)).WithSpec(pod)
}

// stagingEnv is the staging container's environment: the revision, the
// script's own inputs (own), then what every staging container needs.
func (f Fleet) stagingEnv(own ...*corev1ac.EnvVarApplyConfiguration) []*corev1ac.EnvVarApplyConfiguration {
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("REPO").WithValue(f.Staging.Repo),
		corev1ac.EnvVar().WithName("REVISION").WithValue(f.Staging.Revision),
	}
	env = append(env, own...)
	return append(env,
		corev1ac.EnvVar().WithName("HF_HUB_ENABLE_HF_TRANSFER").WithValue("0"),
		// The vLLM image asks the NVIDIA runtime for every GPU of the node;
		// "void" makes it start the container as runc would, without one
		// (NVIDIA container toolkit, NVIDIA_VISIBLE_DEVICES).
		corev1ac.EnvVar().WithName("NVIDIA_VISIBLE_DEVICES").WithValue("void"),
		// Optional: public models need no token, and the Job's spec must not
		// depend on a write-only input the plan cannot see.
		corev1ac.EnvVar().WithName("HF_TOKEN").WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(f.TokenSecretName()).WithKey("token").WithOptional(true))))
}

// stagingPod is the staging Job's pod around its one container, c: run
// once, off the GPU nodes, with the download's requests and limits.
func (f Fleet) stagingPod(c *corev1ac.ContainerApplyConfiguration) *corev1ac.PodSpecApplyConfiguration {
	pod := corev1ac.PodSpec().WithRestartPolicy(corev1.RestartPolicyNever).WithEnableServiceLinks(false).
		WithContainers(c.
			// Requested, so the scheduler counts it and it is not the first evicted.
			WithResources(corev1ac.ResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}).
				WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")})).
			WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).
				WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
			// The kubelet puts the last log lines in the termination message on
			// failure, which the apply's diagnostic quotes.
			WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError))
	if len(f.Staging.NodeSelector) > 0 {
		pod = pod.WithNodeSelector(f.Staging.NodeSelector)
	}
	for _, t := range f.Staging.Tolerations {
		pod = pod.WithTolerations(toleration(t))
	}
	return pod
}

func stagingLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	out["app.kubernetes.io/component"] = "weight-staging"
	return out
}

func (f Fleet) stagingJob(labels map[string]string) any {
	return batchv1ac.Job(f.StagingJobName(), f.Namespace).WithLabels(stagingLabels(labels)).WithSpec(batchv1ac.JobSpec().
		WithBackoffLimit(2).WithActiveDeadlineSeconds(StagingDeadline).WithTemplate(f.stagingTemplate(labels)))
}

// toleration is t as an apply configuration.
func toleration(t corev1.Toleration) *corev1ac.TolerationApplyConfiguration {
	tol := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithEffect(t.Effect)
	if t.Value != "" {
		tol = tol.WithValue(t.Value)
	}
	return tol
}

// TokenSecret is the Secret carrying the Hub token to the staging Job. It is
// applied only when the token is given (a write-only input, never in state),
// and is no part of the rendered hash or of drift.
func (f Fleet) TokenSecret(token string) any {
	return corev1ac.Secret(f.TokenSecretName(), f.Namespace).WithLabels(f.Labels()).WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"token": []byte(strings.TrimSpace(token))})
}
