package bench

// Report is the JSON the bench command writes: the workload and one
// summary per policy, in the order they ran.
type Report struct {
	Mode     string    `json:"mode"`
	Workload Workload  `json:"workload"`
	Policies []Summary `json:"policies"`
	// Live holds what live mode measured about the run itself.
	Live *LiveInfo `json:"live,omitempty"`
	// Lag is the router lag virtual mode modelled.
	Lag *RouterLag `json:"router_lag,omitempty"`
}

// Policy returns the named policy's summary, or nil.
func (r *Report) Policy(name string) *Summary {
	for i := range r.Policies {
		if r.Policies[i].Policy == name {
			return &r.Policies[i]
		}
	}
	return nil
}
