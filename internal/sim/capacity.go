package sim

import "math"

// GPUMemory is the memory budget from which vLLM sizes its KV cache: of
// the memory it may use (total x gpu_memory_utilization) it keeps what the
// weights, the profiled peak activations, non-torch allocations and CUDA
// graphs take, and gives the rest to KV blocks.
type GPUMemory struct {
	TotalBytes      float64
	Utilization     float64
	WeightBytes     float64
	ActivationBytes float64
	NonTorchBytes   float64
	CUDAGraphBytes  float64
	KVBytesPerToken float64
	BlockSize       int
}

const gib = 1 << 30

// DefaultA10G is Qwen2.5-7B-Instruct (bf16) on one A10G under vLLM defaults.
// The reservations below the weights are estimates, written out so the
// sensitivity runs (num_gpu_blocks -20% / +20%) can be read against them.
func DefaultA10G() GPUMemory {
	return GPUMemory{
		// nvidia-smi reports 23,028 MiB on an A10G (24 GB GDDR6 less ECC
		// and driver reservations).
		TotalBytes: 23028 << 20,
		// vLLM's --gpu-memory-utilization default.
		Utilization: 0.9,
		// 7.61e9 parameters x 2 bytes (model card; safetensors total 15.2 GB).
		WeightBytes: 7.61e9 * 2,
		// vLLM's profile run pushes max_num_batched_tokens (2,048) tokens
		// through the model and a dummy sampler over max_num_seqs (256)
		// sequences: MLP gate/up output 2,048 x 2 x 18,944 x 2 B = 155 MB,
		// fp32 logits 256 x 152,064 x 4 B = 156 MB, plus softmax/sort
		// copies of the logits: about 0.75 GiB at peak.
		ActivationBytes: 0.75 * gib,
		// CUDA context, cuBLAS/NCCL workspaces counted as non-torch memory.
		NonTorchBytes: 0.45 * gib,
		// CUDA graphs for the default capture sizes (up to 512), which
		// recent vLLM profiles before sizing the cache.
		CUDAGraphBytes:  0.5 * gib,
		KVBytesPerToken: KVBytesPerToken(28, 4, 128, 2),
		BlockSize:       16,
	}
}

// KVCacheBytes is what remains for KV blocks.
func (g GPUMemory) KVCacheBytes() float64 {
	return g.TotalBytes*g.Utilization - g.WeightBytes - g.ActivationBytes - g.NonTorchBytes - g.CUDAGraphBytes
}

// GPUBlocks is num_gpu_blocks: KV bytes over bytes per block, rounded down.
func (g GPUMemory) GPUBlocks() int {
	return int(math.Floor(g.KVCacheBytes() / (g.KVBytesPerToken * float64(g.BlockSize))))
}
