package testenv

import (
	"fmt"
	"io"
	"time"
)

// Prepare builds or fetches every cached part and reports each one's time.
func Prepare(w io.Writer) error {
	steps := []struct {
		name string
		run  func() error
	}{
		{"control plane " + KubernetesVersion, func() error { _, err := kubebinPath(); return err }},
		{"kwok " + kwokVersion, func() error { _, _, _, err := kwokPaths(); return err }},
		{"npm test packages", func() error { _, err := installNodeModules(); return err }},
		{"prometheus-operator CRDs " + prometheusOperatorVersion, func() error { _, err := prometheusOperatorCRDDir(); return err }},
		{"InferencePool CRD " + GIEVersion, func() error { _, err := gieDir(); return err }},
		{TerraformNewest.String(), func() error { _, err := TerraformNewest.Path(); return err }},
		{TerraformFloor.String(), func() error { _, err := TerraformFloor.Path(); return err }},
		{OpenTofu.String(), func() error { _, err := OpenTofu.Path(); return err }},
		{"vLLM " + VLLMVersion + " and its tiny model", func() error { _, err := installVLLM(); return err }},
	}
	for _, s := range steps {
		began := time.Now()
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(w, "testenv: %-28s ready in %s\n", s.name, time.Since(began).Round(time.Millisecond))
	}
	return nil
}
