package testenv

import (
	"fmt"
	"io"
	"time"
)

// Prepare builds or fetches every cached part and reports each one's time.
// The real vLLM's environment installs beside the builds: pip spends its
// time downloading and unpacking on one core, while each Go build keeps
// both busy, so the two overlap instead of adding up.
func Prepare(w io.Writer) error {
	vllm := make(chan error, 1)
	go func() {
		vllm <- prepareStep(w, "vLLM "+VLLMVersion+" and its tiny model", func() error { _, err := installVLLM(); return err })
	}()
	steps := []struct {
		name string
		run  func() error
	}{
		{"control plane " + KubernetesVersion, func() error { _, err := kubebinPath(); return err }},
		{"kwok " + kwokVersion, func() error { _, _, _, err := kwokPaths(); return err }},
		{"Karpenter " + KarpenterVersion + " (kwok build)", func() error { _, _, err := karpenterPaths(); return err }},
		{"npm test packages", func() error { _, err := installNodeModules(); return err }},
		{"prometheus-operator CRDs " + prometheusOperatorVersion, func() error { _, err := prometheusOperatorCRDDir(); return err }},
		{"InferencePool CRD " + GIEVersion, func() error { _, err := gieDir(); return err }},
		{TerraformNewest.String(), func() error { _, err := TerraformNewest.Path(); return err }},
		{TerraformFloor.String(), func() error { _, err := TerraformFloor.Path(); return err }},
		{OpenTofu.String(), func() error { _, err := OpenTofu.Path(); return err }},
	}
	var first error
	for _, s := range steps {
		if first = prepareStep(w, s.name, s.run); first != nil {
			break
		}
	}
	if err := <-vllm; first == nil {
		first = err
	}
	return first
}

// prepareStep runs one step and reports its time.
func prepareStep(w io.Writer, name string, run func() error) error {
	began := time.Now()
	if err := run(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(w, "testenv: %-28s ready in %s\n", name, time.Since(began).Round(time.Millisecond))
	return nil
}
