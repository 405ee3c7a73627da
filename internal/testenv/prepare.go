package testenv

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Prepare builds or fetches every cached part and reports each one's time.
// The Go builds run in two lanes and the real vLLM's environment installs
// beside them: a cold build's module downloads and its final link each
// leave a core idle, and pip spends its time downloading and unpacking on
// one core, so the three overlap instead of adding up.
func Prepare(w io.Writer) error {
	type step struct {
		name string
		run  func() error
	}
	lanes := [][]step{
		{
			{"vLLM " + VLLMVersion + " and its tiny model", func() error { _, err := installVLLM(); return err }},
		},
		{
			{"control plane " + KubernetesVersion, func() error { _, err := kubebinPath(); return err }},
			{"kwok " + kwokVersion, func() error { _, _, _, err := kwokPaths(); return err }},
			{TerraformFloor.String(), func() error { _, err := TerraformFloor.Path(); return err }},
			{"npm test packages", func() error { _, err := installNodeModules(); return err }},
		},
		{
			{"Karpenter " + KarpenterVersion + " (kwok build)", func() error { _, _, err := karpenterPaths(); return err }},
			{TerraformNewest.String(), func() error { _, err := TerraformNewest.Path(); return err }},
			{OpenTofu.String(), func() error { _, err := OpenTofu.Path(); return err }},
			{"prometheus-operator CRDs " + prometheusOperatorVersion, func() error { _, err := prometheusOperatorCRDDir(); return err }},
			{"InferencePool CRD " + GIEVersion, func() error { _, err := gieDir(); return err }},
		},
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range lane {
				mu.Lock()
				failed := len(errs) > 0
				mu.Unlock()
				if failed {
					return
				}
				if err := prepareStep(w, &mu, s.name, s.run); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareStep runs one step and reports its time, holding mu to write.
func prepareStep(w io.Writer, mu *sync.Mutex, name string, run func() error) error {
	began := time.Now()
	if err := run(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(w, "testenv: %-28s ready in %s\n", name, time.Since(began).Round(time.Millisecond))
	return nil
}
