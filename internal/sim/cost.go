package sim

// CostModel prices one engine step of a dense decoder on one GPU with a
// roofline: a step takes the longer of its compute time and its memory time,
// plus the host's share, a fixed part and a part per scheduled sequence.
// Prefill is compute-bound (thousands of tokens share one read of the
// weights); decode is memory-bound (every step reads all weights and every
// running sequence's KV cache) at the bandwidth kernels achieve, not the
// datasheet's. DefaultCost gives the values and their sources; doc.go
// tabulates them.
type CostModel struct {
	// FLOPsPerToken is the forward cost of one token through the
	// non-embedding weights: 2 x non-embedding parameters.
	FLOPsPerToken float64
	// FLOPsPerSample is the LM head, run once per sequence that samples a
	// token in the step (vLLM computes logits only at sampled positions).
	FLOPsPerSample float64
	// AttnFLOPsPerPair is attention's cost of one (query token, context
	// position) pair over all layers: 2 (QK^T) + 2 (AV) multiply-adds per
	// head dimension per query head.
	AttnFLOPsPerPair float64
	// WeightBytes is read once per step.
	WeightBytes float64
	// KVBytesPerToken is read for every context token of every scheduled
	// sequence.
	KVBytesPerToken float64
	// PeakFLOPS and MemBandwidth are the GPU's datasheet figures.
	PeakFLOPS    float64
	MemBandwidth float64
	// BandwidthEfficiency is the share of MemBandwidth a decode step's
	// weight reads achieve (sourced: see doc.go).
	BandwidthEfficiency float64
	// KVReadEfficiency is the share of MemBandwidth attention's reads of
	// the paged KV cache achieve. DefaultCost prices them as the weights'
	// reads, for want of a sourced figure of their own; the round-robin
	// calibration cannot tell the two apart (doc.go, "Calibration"), and
	// the routed side's throughput depends on it.
	KVReadEfficiency float64
	// MFU is the share of PeakFLOPS that prefill achieves (fitted).
	MFU float64
	// StepOverhead is the fixed per-step time outside the roofline:
	// scheduling, kernel launches, the engine core's round trip (fitted),
	// in seconds.
	StepOverhead float64
	// SeqOverhead is the per-step host time for each scheduled sequence:
	// input preparation, sampling, detokenizing and streaming its token
	// (fitted), in seconds. It is why a step of 64 sequences costs more
	// than its bytes say.
	SeqOverhead float64
}

// DefaultCost is Qwen2.5-7B-Instruct in bf16 on one NVIDIA A10G with the
// pinned fit (model.go; doc.go tabulates the values and their sources).
func DefaultCost() CostModel { return Qwen25_7B.Cost(A10G, PinnedFit) }

// KVBytesPerToken is K and V for every layer and KV head: 28 x 4 x 128 x 2 x
// 2 bytes = 57,344 bytes for Qwen2.5-7B in bf16.
func KVBytesPerToken(layers, kvHeads, headDim, bytesPerValue int) float64 {
	return float64(layers * kvHeads * headDim * 2 * bytesPerValue)
}

// StepTime is the duration of a step of shape s, in seconds: the roofline
// of its aggregates.
func (c CostModel) StepTime(s *StepShape) float64 {
	flops := c.FLOPsPerToken*float64(s.Tokens) + c.FLOPsPerSample*float64(s.Samples) + c.AttnFLOPsPerPair*s.Pairs
	compute := flops / (c.PeakFLOPS * c.MFU)
	memory := c.WeightBytes/(c.MemBandwidth*c.BandwidthEfficiency) + c.KVBytesPerToken*s.KVTokens/(c.MemBandwidth*c.KVReadEfficiency)
	return max(compute, memory) + c.StepOverhead + c.SeqOverhead*float64(s.Seqs)
}
