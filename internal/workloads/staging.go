package workloads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// Staging fills the volume with the weights once, before the fleet rolls
// out: a Job downloads a pinned Hugging Face revision and leaves a marker, so
// a Job run again (recreated, retried) finds the marker and exits at once.
type Staging struct {
	// Repo and Revision are the Hub's "Org/Model" and a commit, tag or branch.
	Repo, Revision string
	// Image runs the download (huggingface_hub must be in it; vLLM's image has it).
	Image string
}

var hfSource = regexp.MustCompile(`^hf://([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)@([A-Za-z0-9][A-Za-z0-9._-]*)$`)

// ParseSource reads model.source ("hf://Org/Model@revision").
func ParseSource(source string) (repo, revision string, err error) {
	m := hfSource.FindStringSubmatch(source)
	if m == nil {
		return "", "", fmt.Errorf("model.source: %q is not hf://<org>/<model>@<revision>; pin a revision (a commit SHA keeps staging idempotent), e.g. hf://Qwen/Qwen2.5-7B-Instruct@a09a3545", source)
	}
	return m[1], m[2], nil
}

// StagingJobName is the Job's name: one per (source, path), since a Job's
// pod template cannot change.
func (f Fleet) StagingJobName() string {
	sum := sha256.Sum256([]byte(f.Staging.Repo + "@" + f.Staging.Revision + ":" + f.ModelPath))
	return f.Name + "-stage-" + hex.EncodeToString(sum[:])[:8]
}

// TokenSecretName is the Secret holding the Hub token for the staging Job.
func (f Fleet) TokenSecretName() string { return f.Name + "-hf-token" }

// stagingScript downloads into the model directory unless the marker of
// this revision is there, then writes the marker. Inputs come as
// environment variables, never spliced into the script.
const stagingScript = `set -eu
marker="$TARGET/.llmd-staged-$REVISION"
if [ -f "$marker" ]; then echo "llmd: $REPO@$REVISION already staged in $TARGET"; exit 0; fi
echo "llmd: downloading $REPO@$REVISION into $TARGET"
python3 -c 'import os; from huggingface_hub import snapshot_download; snapshot_download(repo_id=os.environ["REPO"], revision=os.environ["REVISION"], local_dir=os.environ["TARGET"], token=os.environ.get("HF_TOKEN") or None)'
touch "$marker"
echo "llmd: staged $REPO@$REVISION"
`

func (f Fleet) stagingJob(labels map[string]string) any {
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("REPO").WithValue(f.Staging.Repo),
		corev1ac.EnvVar().WithName("REVISION").WithValue(f.Staging.Revision),
		corev1ac.EnvVar().WithName("TARGET").WithValue(path.Join(MountPath, f.ModelPath)),
		corev1ac.EnvVar().WithName("HF_HUB_ENABLE_HF_TRANSFER").WithValue("0"),
	}
	// Optional: public models need no token, and the Job's spec must not
	// depend on a write-only input the plan cannot see.
	env = append(env, corev1ac.EnvVar().WithName("HF_TOKEN").WithValueFrom(corev1ac.EnvVarSource().
		WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(f.TokenSecretName()).WithKey("token").WithOptional(true))))
	jobLabels := map[string]string{}
	for k, v := range labels {
		jobLabels[k] = v
	}
	jobLabels["app.kubernetes.io/component"] = "weight-staging"
	pod := corev1ac.PodSpec().WithRestartPolicy(corev1.RestartPolicyNever).WithEnableServiceLinks(false).
		WithNodeSelector(f.NodeSelector).
		WithContainers(corev1ac.Container().WithName("stage").WithImage(f.Staging.Image).
			WithCommand("/bin/sh", "-c", stagingScript).WithEnv(env...).
			// The kubelet puts the last log lines in the termination message on
			// failure, which the apply's diagnostic quotes.
			WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
			WithVolumeMounts(corev1ac.VolumeMount().WithName("weights").WithMountPath(MountPath))).
		WithVolumes(corev1ac.Volume().WithName("weights").WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(f.ClaimName())))
	for _, t := range f.Tolerations {
		tol := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithEffect(t.Effect)
		if t.Value != "" {
			tol = tol.WithValue(t.Value)
		}
		pod = pod.WithTolerations(tol)
	}
	return batchv1ac.Job(f.StagingJobName(), f.Namespace).WithLabels(jobLabels).WithSpec(batchv1ac.JobSpec().
		WithBackoffLimit(2).WithTemplate(corev1ac.PodTemplateSpec().WithLabels(jobLabels).WithSpec(pod)))
}

// TokenSecret is the Secret carrying the Hub token to the staging Job. It is
// applied only when the token is given (a write-only input, never in state),
// and is no part of the rendered hash or of drift.
func (f Fleet) TokenSecret(token string) any {
	return corev1ac.Secret(f.TokenSecretName(), f.Namespace).WithLabels(f.Labels()).WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"token": []byte(strings.TrimSpace(token))})
}
