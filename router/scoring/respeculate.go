package scoring

import "github.com/llmd-dev/terraform-provider-llmd/router/index"

// SpeculateOn records r's blocks as about to be cached on pod (data-parallel
// rank rank, -1 for none), held until the returned Hold settles: for a
// request that ran on another pod than the one Pick chose (a gateway that
// fell back down the endpoint list). Nil when there is nothing to hold.
func (p *Picker) SpeculateOn(r *Request, pod string, rank int) *index.Hold {
	if p.ix == nil || len(r.Tokens) == 0 {
		return nil
	}
	bs := p.ix.BlockSize()
	if bs <= 0 {
		return nil
	}
	keys := index.Keys(nil, r.Tokens, bs, r.LoRA, r.Extra)
	if len(keys) == 0 {
		return nil
	}
	return p.speculate(index.Engine{Pod: pod, Rank: max(rank, 0)}, keys)
}
