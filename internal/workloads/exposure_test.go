package workloads

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// testFleet is a valid fleet on an FSx volume with the baseline Service.
func testFleet() Fleet {
	return Fleet{Name: "qwen", Namespace: "llmd", ServedName: "Qwen/Qwen2.5-7B-Instruct", ModelPath: "Qwen2.5-7B-Instruct",
		Storage:  Storage{FileSystemID: "fs-0123456789abcdef0", DNSName: "fs.example", MountName: "abcdefgh"},
		Replicas: 2, VLLM: VLLM{Image: "vllm/vllm-openai:v0.30.0", BlockSize: 64, GPUMemoryUtilization: 0.9, MaxModelLen: 8192, MaxNumSeqs: 64, TensorParallelSize: 1},
		KVEvents:  KVEvents{Port: 5557, ReplayPort: 5558, Topic: "kv@{ip}:{port}@{model}"},
		Resources: Resources{CPU: "3", Memory: "12Gi", MemoryLimit: "14Gi", Shm: "8Gi"},
		Rollout:   Rollout{MaxUnavailable: 1, StartupSeconds: 1200},
		Baseline:  Baseline{Enabled: true, Exposure: Exposure{Type: "ClusterIP", Port: 8000, Internal: true}}}
}

// TestExposureAnnotations: a LoadBalancer is an internal NLB by default in
// the annotation each AWS controller reads; internal = false asks for an
// internet-facing one; the user's annotations win; a ClusterIP gets none.
func TestExposureAnnotations(t *testing.T) {
	internal := Exposure{Type: "LoadBalancer", Port: 80, Internal: true}.annotations()
	if internal[AnnotationLBInternal] != "true" || internal[AnnotationLBType] != "nlb" || internal[AnnotationLBScheme] != "internal" {
		t.Errorf("internal load balancer annotations %v", internal)
	}
	open := Exposure{Type: "LoadBalancer", Port: 80}
	if a := open.annotations(); a[AnnotationLBScheme] != "internet-facing" || a[AnnotationLBInternal] != "" || !open.InternetFacing() {
		t.Errorf("internet-facing annotations %v (internet-facing: %v)", a, open.InternetFacing())
	}
	lbc := Exposure{Type: "LoadBalancer", Internal: true, Annotations: map[string]string{AnnotationLBType: "external"}}
	if lbc.InternetFacing() || lbc.annotations()[AnnotationLBType] != "external" {
		t.Errorf("a Service handed to the AWS Load Balancer Controller with scheme internal reads as internet-facing: %v", lbc.annotations())
	}
	overridden := Exposure{Type: "LoadBalancer", Internal: true, Annotations: map[string]string{AnnotationLBInternal: "false"}}
	if !overridden.InternetFacing() {
		t.Error("an annotation setting aws-load-balancer-internal=false is not seen as internet-facing")
	}
	if a := (Exposure{Type: "ClusterIP", Port: 80, Internal: true}).annotations(); len(a) != 0 {
		t.Errorf("a ClusterIP Service gets annotations %v", a)
	}
}

// TestExposureRefusesAnOpenLoadBalancer: an internet-facing router needs
// source ranges or its API key; the baseline, which has no key, needs
// source ranges; each error names the attribute and the fix.
func TestExposureRefusesAnOpenLoadBalancer(t *testing.T) {
	r := testRouter()
	r.Service = Exposure{Type: "LoadBalancer", Port: 80}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "service.load_balancer_source_ranges") || !strings.Contains(err.Error(), "api_key") {
		t.Errorf("open router: %v", err)
	}
	r.APIKeyVersion = "1"
	if err := r.Validate(); err != nil {
		t.Errorf("open router with an API key: %v", err)
	}
	r.APIKeyVersion, r.Service.SourceRanges = "", []string{"203.0.113.0/24"}
	if err := r.Validate(); err != nil {
		t.Errorf("open router with source ranges: %v", err)
	}
	f := testFleet()
	f.Baseline.Exposure = Exposure{Type: "LoadBalancer", Port: 80}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "baseline_service.load_balancer_source_ranges") || strings.Contains(err.Error(), "api_key") {
		t.Errorf("open baseline: %v", err)
	}
	f.Baseline.Enabled = false
	if err := f.Validate(); err != nil {
		t.Errorf("a disabled baseline is checked: %v", err)
	}
}

// TestRouterAPIKeyFromSecret: with a key the router reads it from its
// Secret (not optional: no Secret, no pod) and its version is in the pod
// template, so a new key rolls the pods.
func TestRouterAPIKeyFromSecret(t *testing.T) {
	r := testRouter()
	r.APIKeyVersion = "7"
	objs, err := r.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "router", &dep)
	env := dep.Spec.Template.Spec.Containers[0].Env
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == apiKeyEnv })
	if i < 0 || env[i].ValueFrom.SecretKeyRef.Name != "router-api-key" || env[i].ValueFrom.SecretKeyRef.Optional != nil {
		t.Fatalf("env %+v", env)
	}
	if dep.Spec.Template.Annotations[APIKeyVersionKey] != "7" {
		t.Errorf("template annotations %v", dep.Spec.Template.Annotations)
	}
}

// TestVLLMSecurityAndAccessLog: the vLLM container may not escalate, has
// no capabilities and the runtime's seccomp profile; probes and scrapes
// stay out of its access log, and extra_args may not set that flag again.
func TestVLLMSecurityAndAccessLog(t *testing.T) {
	f := testFleet()
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "qwen", &dep)
	c := dep.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("vLLM security context %+v", sc)
	}
	i := slices.Index(c.Args, "--disable-access-log-for-endpoints")
	if i < 0 || c.Args[i+1] != "/health,/metrics" {
		t.Errorf("args %v", c.Args)
	}
	f.VLLM.ExtraArgs = []string{"--disable-access-log-for-endpoints=/ping"}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "vllm.extra_args") {
		t.Errorf("a second access-log flag: %v", err)
	}
}
