package scoring

// minMaxLow scores values so that the lowest gets 1 and the highest 0,
// linearly in between, as llm-d's load scorers normalise; entries with
// ok[i] false get 0 and do not set the range. When every counted value is
// equal they all get 1: nothing tells them apart.
func minMaxLow(vals []float64, ok func(i int) bool, out []float64) {
	lo, hi, any := 0.0, 0.0, false
	for i, v := range vals {
		if !ok(i) {
			continue
		}
		if !any || v < lo {
			lo = v
		}
		if !any || v > hi {
			hi = v
		}
		any = true
	}
	for i, v := range vals {
		switch {
		case !ok(i):
			out[i] = 0
		case hi == lo:
			out[i] = 1
		default:
			out[i] = (hi - v) / (hi - lo)
		}
	}
}

// always is the ok function of values that are always known.
func always(int) bool { return true }
