package awsinfra

import (
	"errors"
	"sync"
)

// parallel runs independent parts at once and reports every failure, not just
// the first, so one apply shows all that went wrong.
func parallel(jobs ...func() error) error {
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = job()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
