package bench

import "testing"

// series builds a constructed run: every pod's (waiting, kv) the same in
// every loaded sample.
func series(samples int, waiting []int, kv []float64) *Series {
	s := newSeries(len(waiting))
	for t := range samples {
		s.T = append(s.T, float64(t))
		s.Loaded = append(s.Loaded, true)
		for i := range waiting {
			p := &s.Pods[i]
			p.Requests = append(p.Requests, t)
			p.Waiting = append(p.Waiting, waiting[i])
			p.Running = append(p.Running, 1)
			p.KVUsage = append(p.KVUsage, kv[i])
		}
	}
	return s
}

func TestDetectHerding(t *testing.T) {
	for _, tc := range []struct {
		name     string
		requests []int
		s        *Series
		herded   bool
		pod      int
		ratio    float64
		idle     int
	}{
		// The collapse measured live: 393 of 1,800 on one pod, the other
		// seven 177-215, one of them idle with spare KV.
		{"one pod drew 393 of 1800 while another idled", []int{393, 177, 215, 200, 205, 210, 200, 200},
			series(10, []int{40, 0, 3, 3, 3, 3, 3, 3}, []float64{1, 0.3, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}), true, 0, 1.75, 1},
		{"even load", []int{225, 225, 225, 225}, series(10, []int{1, 0, 0, 0}, []float64{0.5, 0.5, 0.5, 0.5}), false, 0, 1, 1},
		// Hot, but every other pod queued or full: no room elsewhere.
		{"hot pod, no room elsewhere", []int{400, 200, 200, 200},
			series(10, []int{30, 2, 2, 2}, []float64{1, 0.95, 0.95, 0.95}), false, 0, 1.6, -1},
		// Idle pods with spare KV, but the hot pod never queued: not a herd.
		{"hot pod never queued", []int{400, 200, 200, 200},
			series(10, []int{0, 0, 0, 0}, []float64{0.5, 0.2, 0.2, 0.2}), false, 0, 1.6, -1},
		{"no series: ratio alone", []int{10, 2, 2, 2}, nil, true, 0, 2.5, -1},
		{"nothing ran", []int{0, 0}, nil, false, 0, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := DetectHerding(tc.requests, tc.s)
			if h.Herded != tc.herded || h.Pod != tc.pod || h.IdlePod != tc.idle || h.Ratio < tc.ratio-0.01 || h.Ratio > tc.ratio+0.01 {
				t.Errorf("got %+v, want herded %v pod %d ratio %.2f idle pod %d", h, tc.herded, tc.pod, tc.ratio, tc.idle)
			}
		})
	}
}
