package scoring

// KVUsageType names the KV-utilisation scorer in the configuration.
const KVUsageType = "kv-usage"

// KVUsage prefers pods with free KV-cache blocks: 1 - kv_cache_usage_perc as
// last scraped. A nearly full cache evicts the prefixes other requests
// would reuse, and past full it preempts running requests. A stale pod
// scores 0.
//
// Parameters: none.
type KVUsage struct{}

var _ Scorer = KVUsage{}

// NewKVUsage returns the KV-utilisation scorer.
func NewKVUsage() KVUsage { return KVUsage{} }

// Type implements Scorer.
func (KVUsage) Type() string { return KVUsageType }

// Score implements Scorer.
func (KVUsage) Score(s *State, out []float64) {
	for i, p := range s.Pods {
		if !p.Load.Fresh {
			out[i] = 0
			continue
		}
		out[i] = 1 - min(max(p.Load.KVUsage, 0), 1)
	}
}
