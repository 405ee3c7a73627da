package workloads

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// RouterBinary is where the router image holds llmd-router (the image's
// entrypoint runs its serve command; a benchmark Job runs its bench).
const RouterBinary = "/usr/local/bin/llmd-router"

// BenchmarkComponent is the app.kubernetes.io/component label of an A/B
// benchmark's Job and pods.
const BenchmarkComponent = "benchmark"

// Benchmark is an A/B run inside the cluster: a Job running the router
// image's `bench` in live mode against a fleet's engines (the baseline
// Service's endpoints: round robin, as the Service spreads connections) and
// the router's pods (spread as the router's Service spreads them), placed
// like the router (its node selector, tolerations, the fleet's claim for
// the tokenizer files, the router's API key Secret).
type Benchmark struct {
	// Name and Namespace are the Job's; Router names the router measured.
	Name, Namespace, Router string
	// Image is the router's image.
	Image string
	// Engines and Routers are base URLs, http://<pod IP>:<port>.
	Engines, Routers []string
	// Model is the served model name; BlockSize the engines' KV block size.
	Model     string
	BlockSize int
	// TokenizerJSON and TokenizerConfig are paths on the claim's mount
	// (empty: token prompts, no tokenizer); Claim is the fleet's claim.
	TokenizerJSON, TokenizerConfig, Claim string
	// APIKey, when set, is the router's own key, passed as it is to the
	// router: from its Secret, never in the Job's spec.
	APIKey *corev1.SecretKeySelector
	// Workload are bench flags the user set, flag name to value; the
	// bench's seed workload fills the rest.
	Workload map[string]string
	// NodeSelector and Tolerations place the pod, as the router's.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// DeadlineSeconds bounds the Job (activeDeadlineSeconds).
	DeadlineSeconds int64
}

// BenchmarkFlags are the bench flags Benchmark.Workload may set.
var BenchmarkFlags = []string{"dataset", "num-prompts", "max-concurrency", "request-rate", "prefix-repetition-num-prefixes",
	"prefix-repetition-prefix-len", "prefix-repetition-suffix-len", "prefix-repetition-output-len", "seed"}

// benchmarkJSON is where the bench writes its JSON report (it requires
// one), on the pod's own scratch volume.
const benchmarkJSON = "/tmp/ab.json"

// Args are the bench command's arguments.
func (b Benchmark) Args() ([]string, error) {
	if len(b.Engines) == 0 {
		return nil, fmt.Errorf("no ready engine behind the fleet's baseline Service")
	}
	if len(b.Routers) == 0 {
		return nil, fmt.Errorf("no ready pod behind router %s's Service", b.Router)
	}
	args := []string{"--mode", "live", "--policies", "rr,router",
		"--engines", strings.Join(b.Engines, ","), "--router-urls", strings.Join(b.Routers, ","),
		"--model", b.Model, "--block-size", strconv.Itoa(b.BlockSize), "--json", benchmarkJSON}
	if b.TokenizerJSON != "" {
		args = append(args, "--tokenizer", b.TokenizerJSON, "--tokenizer-config", b.TokenizerConfig)
	} else {
		args = append(args, "--prompts", "tokens")
	}
	for _, f := range BenchmarkFlags {
		if v, ok := b.Workload[f]; ok {
			args = append(args, "--"+f, v)
		}
	}
	for f := range b.Workload {
		if !slices.Contains(BenchmarkFlags, f) {
			return nil, fmt.Errorf("bench flag %q is not one a benchmark sets", f)
		}
	}
	return args, nil
}

// Labels are on the Job and its pods.
func (b Benchmark) Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "llmd-router", "app.kubernetes.io/component": BenchmarkComponent,
		"app.kubernetes.io/part-of": "llmd", "app.kubernetes.io/managed-by": "llmd", "llmd.dev/router": b.Router}
}

// Job is the benchmark's Job: one pod, never retried (a second run would
// measure warm caches), under Pod Security "restricted", its container's
// log the bench's progress and table.
func (b Benchmark) Job() (*batchv1.Job, error) {
	args, err := b.Args()
	if err != nil {
		return nil, err
	}
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	volumes := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}}}
	if b.TokenizerJSON != "" {
		if b.Claim == "" {
			return nil, fmt.Errorf("the tokenizer files are on the fleet's claim, and the router names none")
		}
		mounts = append(mounts, corev1.VolumeMount{Name: "weights", MountPath: MountPath, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "weights", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: b.Claim, ReadOnly: true}}})
	}
	var env []corev1.EnvVar
	if b.APIKey != nil {
		env = append(env, corev1.EnvVar{Name: apiKeyEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: b.APIKey}})
	}
	labels := b.Labels()
	container := corev1.Container{
		Name: "bench", Image: b.Image, Command: []string{RouterBinary, "bench"}, Args: args, Env: env, VolumeMounts: mounts,
		// The bench holds one workload's prompts and a connection per request in flight.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(int32(0)),
			ActiveDeadlineSeconds: ptr.To(b.DeadlineSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					NodeSelector: b.NodeSelector,
					Tolerations:  b.Tolerations,
					Containers:   []corev1.Container{container},
					Volumes:      volumes,
				},
			},
		},
	}, nil
}
