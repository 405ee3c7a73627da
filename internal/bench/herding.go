package bench

// Series is every pod's load over a live run, as the bench sampled the
// replicas' /metrics: what shows a herd forming (one pod's queue growing
// while others idle) and when.
type Series struct {
	// T is each sample's time in simulated seconds from the run's start;
	// Loaded says the client still had requests to send then.
	T      []float64   `json:"t_s"`
	Loaded []bool      `json:"loaded"`
	Pods   []PodSeries `json:"pods"`
}

// PodSeries is one pod's samples, aligned with Series.T.
type PodSeries struct {
	// Requests is how many requests the pod had received by then
	// (finished + running + waiting).
	Requests []int     `json:"requests"`
	Waiting  []int     `json:"waiting"`
	Running  []int     `json:"running"`
	KVUsage  []float64 `json:"kv_usage"`
}

func newSeries(pods int) *Series { return &Series{Pods: make([]PodSeries, pods)} }

func (s *Series) add(t float64, loaded bool, ms []podMetrics) {
	s.T = append(s.T, t)
	s.Loaded = append(s.Loaded, loaded)
	for i, m := range ms {
		p := &s.Pods[i]
		p.Requests = append(p.Requests, int(m.Success+m.Running+m.Waiting))
		p.Waiting = append(p.Waiting, int(m.Waiting))
		p.Running = append(p.Running, int(m.Running))
		p.KVUsage = append(p.KVUsage, m.KVUsage)
	}
}

// Herding thresholds (issue 18's "no run may herd"): a pod herds when it
// serves more than HerdRatio x the mean request count while another pod
// sits with spare KV (use below IdleKV) and no queue, in at least
// IdleShare of the loaded samples in which the herding pod had a queue.
const (
	HerdRatio = 1.5
	IdleKV    = 0.9
	IdleShare = 0.1
)

// Herd is one run's herding verdict.
type Herd struct {
	// Herded: a pod drew more than HerdRatio x the mean while another idled.
	Herded bool `json:"herded"`
	// Pod drew the most requests, Ratio x the mean.
	Pod   int     `json:"pod"`
	Ratio float64 `json:"ratio"`
	// IdlePod is the pod idle most often while Pod queued (-1: none, or no
	// series to tell); IdleShare is that share of Pod's queued samples.
	IdlePod   int     `json:"idle_pod"`
	IdleShare float64 `json:"idle_share"`
}

// DetectHerding judges a run from its per-pod request counts and, when
// there is one, its series. Without a series (virtual mode) a pod above
// HerdRatio x the mean herds: nothing shows the others had room.
func DetectHerding(podRequests []int, s *Series) Herd {
	h := Herd{Pod: -1, IdlePod: -1}
	total := 0
	for i, n := range podRequests {
		total += n
		if h.Pod < 0 || n > podRequests[h.Pod] {
			h.Pod = i
		}
	}
	if total == 0 {
		return h
	}
	h.Ratio = float64(podRequests[h.Pod]) / (float64(total) / float64(len(podRequests)))
	if s == nil || len(s.Pods) != len(podRequests) {
		h.Herded = h.Ratio > HerdRatio
		return h
	}
	hot := s.Pods[h.Pod]
	queued := 0
	idle := make([]int, len(s.Pods))
	for t := range s.T {
		if !s.Loaded[t] || hot.Waiting[t] == 0 {
			continue
		}
		queued++
		for j, p := range s.Pods {
			if j != h.Pod && p.Waiting[t] == 0 && p.KVUsage[t] < IdleKV {
				idle[j]++
			}
		}
	}
	for j, n := range idle {
		if queued > 0 && n > 0 && (h.IdlePod < 0 || n > idle[h.IdlePod]) {
			h.IdlePod = j
		}
	}
	if h.IdlePod >= 0 {
		h.IdleShare = float64(idle[h.IdlePod]) / float64(queued)
	}
	h.Herded = h.Ratio > HerdRatio && h.IdleShare >= IdleShare
	return h
}
