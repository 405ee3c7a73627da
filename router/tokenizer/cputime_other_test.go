//go:build !linux

package tokenizer

import "time"

// threadCPU is only measured on Linux; elsewhere the benchmarks report wall time alone.
func threadCPU() (time.Duration, bool) { return 0, false }
