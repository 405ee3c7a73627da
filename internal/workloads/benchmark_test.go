package workloads

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func testBenchmark() Benchmark {
	return Benchmark{Name: "router-ab", Namespace: "llmd", Router: "router", Image: "ghcr.io/llmd-dev/llmd-router:1.0.0",
		Engines: []string{"http://10.0.1.5:8000", "http://10.0.1.6:8000"}, Routers: []string{"http://10.0.2.7:8000"},
		Model: "Qwen/Qwen2.5-7B-Instruct", BlockSize: 16, Claim: "qwen-weights",
		TokenizerJSON: "/models/Qwen2.5-7B-Instruct/tokenizer.json", TokenizerConfig: "/models/Qwen2.5-7B-Instruct/tokenizer_config.json",
		APIKey:       &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "router-api-key"}, Key: "api-key"},
		Workload:     map[string]string{"num-prompts": "40", "seed": "7"},
		NodeSelector: map[string]string{"llmd.dev/pool": "system"}, DeadlineSeconds: 600}
}

// TestBenchmarkJob: one pod running the image's bench against the given
// endpoints, never retried, bounded, restricted, with the router's key
// from its Secret (never in the spec) and the fleet's claim read-only.
func TestBenchmarkJob(t *testing.T) {
	job, err := testBenchmark().Job()
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 600 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoff %d, deadline %d, restart %s", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, pod.RestartPolicy)
	}
	if strings.Join(c.Command, " ") != RouterBinary+" bench" || c.Name != "bench" {
		t.Errorf("container %s runs %v", c.Name, c.Command)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--mode live", "--policies rr,router", "--engines http://10.0.1.5:8000,http://10.0.1.6:8000",
		"--router-urls http://10.0.2.7:8000", "--block-size 16", "--tokenizer /models/Qwen2.5-7B-Instruct/tokenizer.json",
		"--num-prompts 40", "--seed 7", "--model Qwen/Qwen2.5-7B-Instruct"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if len(c.Env) != 1 || c.Env[0].Value != "" || c.Env[0].ValueFrom.SecretKeyRef.Name != "router-api-key" {
		t.Errorf("env %+v, want the key from the router's Secret only", c.Env)
	}
	if sc := c.SecurityContext; !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v is not restricted", sc)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("the bench needs no API access, yet mounts a token")
	}
	claims := 0
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims++
			if v.PersistentVolumeClaim.ClaimName != "qwen-weights" || !v.PersistentVolumeClaim.ReadOnly {
				t.Errorf("claim %+v", v.PersistentVolumeClaim)
			}
		}
	}
	if claims != 1 || job.Labels["app.kubernetes.io/component"] != BenchmarkComponent || job.Spec.Template.Labels["llmd.dev/router"] != "router" {
		t.Errorf("%d claims, labels %v", claims, job.Labels)
	}
}

// TestBenchmarkRefuses: no engines, no router pods, a flag no attribute
// sets, or tokenizer files without the claim they are on.
func TestBenchmarkRefuses(t *testing.T) {
	for want, edit := range map[string]func(*Benchmark){
		"no ready engine":            func(b *Benchmark) { b.Engines = nil },
		"no ready pod behind router": func(b *Benchmark) { b.Routers = nil },
		`"router-arg"`:               func(b *Benchmark) { b.Workload["router-arg"] = "--x" },
		"names none":                 func(b *Benchmark) { b.Claim = "" },
	} {
		b := testBenchmark()
		edit(&b)
		if _, err := b.Job(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
	}
	b := testBenchmark()
	b.TokenizerJSON, b.Claim = "", ""
	job, err := b.Job()
	if err != nil || !slices.Contains(job.Spec.Template.Spec.Containers[0].Args, "tokens") {
		t.Errorf("without a tokenizer: %v, args %v; want token prompts", err, job.Spec.Template.Spec.Containers[0].Args)
	}
}
