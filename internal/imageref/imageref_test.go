package imageref

import (
	"strings"
	"testing"
)

const (
	ecr    = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
	digest = "sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"busybox", "index.docker.io/library/busybox:latest"},
		{"docker.io/library/busybox:1.36", "index.docker.io/library/busybox:1.36"},
		{"vllm/vllm-openai:v0.30.0", "index.docker.io/vllm/vllm-openai:v0.30.0"},
		{"vllm/vllm-openai@" + digest, "index.docker.io/vllm/vllm-openai@" + digest},
		{"vllm/vllm-openai:v0.30.0@" + digest, "index.docker.io/vllm/vllm-openai:v0.30.0@" + digest},
		{"localhost:5000/router@" + digest, "localhost:5000/router@" + digest},
		{"nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"},
	} {
		r, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := r.String(); got != c.want {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", " busybox", "Vllm/x", "vllm/x@sha256:abc", "vllm/x:v1@md5:" + strings.Repeat("0", 32), "a@b@c"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRewrite(t *testing.T) {
	m, err := NewMirrors(map[string]string{
		"docker.io": ecr + "/docker-hub",
		"nvcr.io":   ecr + "/nvidia/",
		"ghcr.io":   "mirror.example.com:5000",
	}, "image_mirrors")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		// Docker Hub's official images keep library/, which an ECR
		// pull-through cache requires; other Docker Hub repositories have none.
		{"busybox", ecr + "/docker-hub/library/busybox:latest"},
		{"index.docker.io/library/busybox:1.36", ecr + "/docker-hub/library/busybox:1.36"},
		{"vllm/vllm-openai:v0.30.0@" + digest, ecr + "/docker-hub/vllm/vllm-openai:v0.30.0@" + digest},
		{"vllm/vllm-openai@" + digest, ecr + "/docker-hub/vllm/vllm-openai@" + digest},
		{"nvcr.io/nvidia/k8s-device-plugin:v0.20.0", ecr + "/nvidia/nvidia/k8s-device-plugin:v0.20.0"},
		{"ghcr.io/llmd-dev/llmd-router:1.0.0", "mirror.example.com:5000/llmd-dev/llmd-router:1.0.0"},
		// No mirror for the registry: as written.
		{"quay.io/prometheus/prometheus:v3.0.0", "quay.io/prometheus/prometheus:v3.0.0"},
	} {
		got, err := m.Rewrite(c.in)
		if err != nil {
			t.Errorf("Rewrite(%q): %v", c.in, err)
		} else if got != c.want {
			t.Errorf("Rewrite(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestNewMirrorsErrors(t *testing.T) {
	for _, c := range []struct {
		raw  map[string]string
		want string
	}{
		{map[string]string{"https://docker.io": ecr}, `image_mirrors: key "https://docker.io"`},
		{map[string]string{"docker.io/library": ecr}, `image_mirrors: key "docker.io/library"`},
		{map[string]string{"docker.io": ecr, "index.docker.io": ecr}, `keys "docker.io" and "index.docker.io" name the same registry`},
		{map[string]string{"docker.io": "https://" + ecr}, `image_mirrors["docker.io"]: "https://` + ecr + `" has a scheme`},
		{map[string]string{"docker.io": "docker-hub"}, `does not start with a registry host`},
		{map[string]string{"docker.io": ecr + "/docker-hub:v1"}, `no tag, digest or spaces`},
		{map[string]string{"docker.io": ecr + "/Docker-Hub"}, `image_mirrors["docker.io"]`},
	} {
		_, err := NewMirrors(c.raw, "image_mirrors")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewMirrors(%v) = %v, want an error with %q", c.raw, err, c.want)
		}
	}
}
