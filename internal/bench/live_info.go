package bench

// LiveInfo is what a live run measured about itself: the time scale the
// replicas ran at and how far the slowest fell behind its schedule.
type LiveInfo struct {
	TimeScale float64 `json:"time_scale"`
	// MaxLagSeconds is the largest llmd_sim_lag_max_seconds over the
	// replicas, in wall seconds; LagShare is it over the run's wall time.
	MaxLagSeconds float64 `json:"max_lag_s"`
	LagShare      float64 `json:"lag_share"`
	WallSeconds   float64 `json:"wall_s"`
	// RouterArgs are the arguments added to every router the bench
	// started (--router-arg).
	RouterArgs []string `json:"router_args,omitempty"`
	// SchedulingPolicy is the replicas' vLLM --scheduling-policy
	// (--scheduling-policy; "" is vLLM's fcfs).
	SchedulingPolicy string `json:"scheduling_policy,omitempty"`
	// LongPrefillTokenThreshold is the replicas' vLLM
	// --long-prefill-token-threshold (0: no cap).
	LongPrefillTokenThreshold int `json:"long_prefill_token_threshold,omitempty"`
}
