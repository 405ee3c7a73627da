package sim

// ModelShape is what the cost model needs of a dense decoder-only model,
// read off its config.json and model card. Qwen25_7B and Llama3_8B are the
// models of the seed and of the independent measurements (BENCHMARK.md).
type ModelShape struct {
	Name string
	// Layers, QHeads, KVHeads, HeadDim and Hidden are config.json's
	// num_hidden_layers, num_attention_heads, num_key_value_heads,
	// hidden_size / num_attention_heads and hidden_size.
	Layers, QHeads, KVHeads, HeadDim, Hidden int
	// Vocab is config.json's vocab_size, the LM head's rows.
	Vocab int
	// Params is every parameter; NonEmbedParams leaves out the input
	// embedding and the LM head.
	Params, NonEmbedParams float64
	// BytesPerValue is 2 for bf16 and fp16 weights and KV cache.
	BytesPerValue int
}

// Qwen25_7B is Qwen/Qwen2.5-7B-Instruct in bf16: config.json (28 layers,
// 28 query and 4 KV heads, hidden 3,584, vocab 152,064) and the model card
// (7.61e9 parameters, 6.53e9 non-embedding).
var Qwen25_7B = ModelShape{Name: "Qwen2.5-7B-Instruct", Layers: 28, QHeads: 28, KVHeads: 4, HeadDim: 128, Hidden: 3584,
	Vocab: 152064, Params: 7.61e9, NonEmbedParams: 6.53e9, BytesPerValue: 2}

// Llama3_8B is meta-llama/Meta-Llama-3-8B-Instruct in bf16: config.json
// (32 layers, 32 query and 8 KV heads, hidden 4,096, vocab 128,256, untied
// LM head) and the model card (8.03e9 parameters); the input embedding and
// the LM head are 128,256 x 4,096 each, which leaves 6.98e9.
var Llama3_8B = ModelShape{Name: "Meta-Llama-3-8B-Instruct", Layers: 32, QHeads: 32, KVHeads: 8, HeadDim: 128, Hidden: 4096,
	Vocab: 128256, Params: 8.03e9, NonEmbedParams: 8.03e9 - 2*128256*4096, BytesPerValue: 2}

// KVBytesPerToken is K and V for every layer and KV head.
func (m ModelShape) KVBytesPerToken() float64 {
	return KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, m.BytesPerValue)
}

// GPU is a GPU's datasheet figures.
type GPU struct {
	Name string
	// PeakFLOPS is dense bf16/fp16 tensor throughput; MemBandwidth the
	// memory's, in bytes per second.
	PeakFLOPS, MemBandwidth float64
}

// A10G is NVIDIA's A10 datasheet (125 TFLOPS dense bf16, 600 GB/s GDDR6),
// which the A10G shares for memory (Baseten, "NVIDIA A10 vs A10G"); the
// independent rows ran on both (BENCHMARK.md).
var A10G = GPU{Name: "A10G", PeakFLOPS: 125e12, MemBandwidth: 600e9}

// Fitted is the cost model's three fitted parameters (DESIGN.md decision
// 11; BENCHMARKS.md, issue 29 item 1, gives the criterion and the fit).
type Fitted struct {
	// MemEfficiency is the share of the memory bandwidth a decode step's
	// reads achieve, the weights' and the KV cache's alike.
	MemEfficiency float64
	// SeqOverhead is per-step host time per scheduled sequence, seconds.
	SeqOverhead float64
	// MFU is the share of the peak FLOPS that prefill achieves.
	MFU float64
}

// PinnedFit is the fit to the independent rows and the seed's round-robin
// side (BENCHMARKS.md, issue 29 item 1; TestPinnedCostModel pins it).
var PinnedFit = Fitted{MemEfficiency: 0.77, SeqOverhead: 0.0001, MFU: 0.48}

// Cost is the roofline cost model of m on g with the fitted parameters f.
func (m ModelShape) Cost(g GPU, f Fitted) CostModel {
	return CostModel{
		FLOPsPerToken:       2 * m.NonEmbedParams,
		FLOPsPerSample:      2 * float64(m.Hidden) * float64(m.Vocab),
		AttnFLOPsPerPair:    float64(4 * m.Layers * m.QHeads * m.HeadDim),
		WeightBytes:         m.Params * float64(m.BytesPerValue),
		KVBytesPerToken:     m.KVBytesPerToken(),
		PeakFLOPS:           g.PeakFLOPS,
		MemBandwidth:        g.MemBandwidth,
		BandwidthEfficiency: f.MemEfficiency,
		KVReadEfficiency:    f.MemEfficiency,
		MFU:                 f.MFU,
		SeqOverhead:         f.SeqOverhead,
	}
}
