package proxy

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// engineDigest is one engine's line of GET /v1/index.
type engineDigest struct {
	Pod    string `json:"pod"`
	Rank   int    `json:"rank"`
	Blocks int    `json:"blocks"`
	// Digest is an order-independent hash of the engine's blocks (hex):
	// equal on two replicas when they hold the same blocks on the same tiers.
	Digest string `json:"digest"`
}

// indexDigests answers GET /v1/index: every engine in the block index with
// its block count and digest, sorted by pod and rank, so that replicas'
// indexes can be compared (a warm start from a peer, a test).
func (s *Server) indexDigests(w http.ResponseWriter, _ *http.Request) {
	ix := s.cfg.Picker.Index()
	out := []engineDigest{}
	if ix != nil {
		for _, e := range ix.Engines() {
			if n, d, ok := ix.Digest(e); ok {
				out = append(out, engineDigest{Pod: e.Pod, Rank: e.Rank, Blocks: n, Digest: strconv.FormatUint(d, 16)})
			}
		}
	}
	slices.SortFunc(out, func(a, b engineDigest) int { return cmp.Or(cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Rank, b.Rank)) })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Engines []engineDigest `json:"engines"`
	}{out})
}
