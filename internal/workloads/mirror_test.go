package workloads

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/imageref"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

const testECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"

// containerImages are the images of every container, init container and
// ephemeral container anywhere in the objects, read from the objects as
// they are applied.
func containerImages(t *testing.T, objs []kube.Object) []string {
	t.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "containers" || k == "initContainers" || k == "ephemeralContainers" {
					for _, c := range x.([]any) {
						out = append(out, c.(map[string]any)["image"].(string))
					}
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, o := range objs {
		walk(o.Body().Object)
	}
	return out
}

// productObjects are the objects of everything the product deploys at its
// default images: a fleet that stages its weights (with the PodMonitor), a
// router at the provider's pinned image form, and the device plugin.
func productObjects(t *testing.T, m imageref.Mirrors) []kube.Object {
	t.Helper()
	f := stagedFleet(DefaultVLLMImage, testCommit)
	f.VLLM.Image = DefaultVLLMImage
	f, err := f.Mirrored(m)
	if err != nil {
		t.Fatal(err)
	}
	r := testRouter()
	r.Image = buildinfo.ImageRepository + ":1.0.0@sha256:" + strings.Repeat("ab", 32)
	if r, err = r.Mirrored(m); err != nil {
		t.Fatal(err)
	}
	d, err := DevicePlugin{Image: DefaultDevicePluginImage, NodeSelector: map[string]string{"llmd.dev/pool": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}.Mirrored(m)
	if err != nil {
		t.Fatal(err)
	}
	var all []kube.Object
	for _, objs := range []func() ([]kube.Object, error){func() ([]kube.Object, error) { return f.Objects(true) },
		func() ([]kube.Object, error) { return r.Objects(true) }, d.Objects} {
		o, err := objs()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, o...)
	}
	return all
}

// TestMirroredEveryImage: with a mirror for each upstream registry the
// product's images come from, every container image in every object the
// product applies is the upstream reference, normalised, under its
// registry's mirror, with its repository, tag and digest. The upstream
// registries are read from the objects applied without mirrors, so an
// image added later is covered without a change here.
func TestMirroredEveryImage(t *testing.T) {
	upstream := containerImages(t, productObjects(t, nil))
	if len(upstream) < 4 {
		t.Fatalf("found %d container images (%v), want the vLLM, staging, router and device plugin containers at least", len(upstream), upstream)
	}
	raw := map[string]string{}
	for _, img := range upstream {
		r, err := imageref.Parse(img)
		if err != nil {
			t.Fatalf("the product deploys %q: %v", img, err)
		}
		raw[r.Registry] = testECR + "/" + strings.NewReplacer(".", "-", ":", "-").Replace(r.Registry)
	}
	m, err := imageref.NewMirrors(raw, "image_mirrors")
	if err != nil {
		t.Fatal(err)
	}
	mirrored := containerImages(t, productObjects(t, m))
	if len(mirrored) != len(upstream) {
		t.Fatalf("%d images mirrored, %d upstream", len(mirrored), len(upstream))
	}
	want := map[string]int{}
	for _, img := range upstream {
		r, _ := imageref.Parse(img)
		r.Registry = raw[r.Registry]
		want[r.String()]++
	}
	for _, img := range mirrored {
		if want[img] == 0 {
			t.Errorf("deployed image %s is not an upstream image under its mirror (want one of %v)", img, want)
		}
		want[img]--
		if !strings.HasPrefix(img, testECR+"/") {
			t.Errorf("deployed image %s is not pulled from the mirror", img)
		}
	}
	t.Logf("%d container images, from %d registries, all mirrored: %v", len(mirrored), len(raw), mirrored)
}

// TestImageDigestForms: an image given by digest alone or by tag and digest
// is deployed as written, and mirrored with its digest (what the runtime
// pulls) and its tag kept; an image that is no reference is an error naming
// the attribute.
func TestImageDigestForms(t *testing.T) {
	const digest = "@sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90"
	m, err := imageref.NewMirrors(map[string]string{"docker.io": testECR + "/docker-hub"}, "image_mirrors")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ image, want, wantMirrored string }{
		{"vllm/vllm-openai" + digest, "vllm/vllm-openai" + digest, testECR + "/docker-hub/vllm/vllm-openai" + digest},
		{"vllm/vllm-openai:v0.30.0" + digest, "vllm/vllm-openai:v0.30.0" + digest, testECR + "/docker-hub/vllm/vllm-openai:v0.30.0" + digest},
	} {
		for _, mm := range []struct {
			m    imageref.Mirrors
			want string
		}{{nil, c.want}, {m, c.wantMirrored}} {
			f := stagedFleet(c.image, testCommit)
			f.VLLM.Image = c.image
			f, err := f.Mirrored(mm.m)
			if err != nil {
				t.Fatalf("%s: %v", c.image, err)
			}
			objs, err := f.Objects(false)
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range containerImages(t, objs) {
				if img != mm.want {
					t.Errorf("image %s (mirrors %v) deployed as %s, want %s", c.image, mm.m, img, mm.want)
				}
			}
		}
	}
	for _, c := range []struct{ vllm, staging, field string }{
		{"vllm/vllm-openai:v0.30.0@sha256:short", DefaultVLLMImage, "vllm.image: "},
		{DefaultVLLMImage, "vllm/vllm-openai@sha256:short", "model.staging_image: "},
	} {
		f := stagedFleet(c.staging, testCommit)
		f.VLLM.Image = c.vllm
		if _, err := f.Mirrored(nil); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("a bad digest gave %v, want an error naming %s", err, c.field)
		}
	}
}

// TestVolumeNamesCarryTheFileSystem: the volume and the claim are named
// after the file system, so a new one is a new pair; a fleet that keeps the
// names of earlier providers has none in them.
func TestVolumeNamesCarryTheFileSystem(t *testing.T) {
	f := testFleet()
	objs, err := f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	find(t, objs, "PersistentVolume", "", "llmd-qwen-weights-fs-0123456789abcdef0", &pv)
	if pv.Spec.ClaimRef.Name != "qwen-weights-fs-0123456789abcdef0" || f.ClaimName() != pv.Spec.ClaimRef.Name || f.Target().ClaimName != f.ClaimName() {
		t.Errorf("claim %s / %s / %s", pv.Spec.ClaimRef.Name, f.ClaimName(), f.Target().ClaimName)
	}
	f.Storage.UnversionedNames = true
	if objs, err = f.Objects(false); err != nil {
		t.Fatal(err)
	}
	find(t, objs, "PersistentVolume", "", LegacyVolumeName("llmd", "qwen"), &pv)
	if f.ClaimName() != "qwen-weights" {
		t.Errorf("claim %s under the earlier names", f.ClaimName())
	}
	f.Storage.FileSystemID = "fs-0123456789ABCDEF0"
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "storage.file_system_id") {
		t.Errorf("an id unfit for a name gave %v", err)
	}
}
