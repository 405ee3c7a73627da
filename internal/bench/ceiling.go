package bench

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// EngineCaches is the engines' KV caches as they state them in vLLM's
// vllm:cache_config_info (labels block_size and num_gpu_blocks).
type EngineCaches struct {
	// Blocks is the engines' blocks in all; BlockSize the tokens per block.
	Blocks    int `json:"blocks"`
	BlockSize int `json:"block_size"`
}

// readCaches reads every engine's cache size. Engines of one fleet share a
// block size; a fleet whose engines differ is refused, since no ceiling
// holds for it.
func readCaches(ctx context.Context, engines []string) (EngineCaches, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	var c EngineCaches
	for _, base := range engines {
		var blocks, size int
		err := getMetrics(ctx, hc, base, func(r io.Reader) error {
			var err error
			blocks, size, err = parseCacheConfig(r)
			return err
		})
		if err != nil {
			return c, fmt.Errorf("reading the KV cache size of %s: %w", base, err)
		}
		if c.BlockSize != 0 && size != c.BlockSize {
			return c, fmt.Errorf("%s has blocks of %d tokens, another engine %d: the engines are not one fleet", base, size, c.BlockSize)
		}
		c.Blocks, c.BlockSize = c.Blocks+blocks, size
	}
	return c, nil
}

// parseCacheConfig reads one engine's blocks and block size; an engine
// with several data-parallel ranks states each (label engine), and their
// blocks add up.
func parseCacheConfig(r io.Reader) (blocks, blockSize int, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, 0, err
	}
	fam, ok := fams["vllm:cache_config_info"]
	if !ok {
		return 0, 0, fmt.Errorf("no vllm:cache_config_info in /metrics: is this a vLLM engine?")
	}
	for _, m := range fam.GetMetric() {
		var n, size int
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "num_gpu_blocks":
				n, err = strconv.Atoi(l.GetValue())
			case "block_size":
				size, err = strconv.Atoi(l.GetValue())
			}
			if err != nil {
				return 0, 0, fmt.Errorf("vllm:cache_config_info label %s=%q: %w", l.GetName(), l.GetValue(), err)
			}
		}
		if n <= 0 || size <= 0 {
			return 0, 0, fmt.Errorf("vllm:cache_config_info states no num_gpu_blocks and block_size")
		}
		blocks, blockSize = blocks+n, size
	}
	return blocks, blockSize, nil
}

// hitCeiling is the most prefix-cache hit rate, in vLLM's terms (cached
// prompt tokens over prompt tokens, once per request), that prompts allow
// on caches: the prompts in the order they are sent, against one cache of
// every engine's blocks evicting the least recently used, each prompt
// hitting its longest run of cached full blocks but always computing its
// last token (vLLM's KVCacheManager.get_computed_blocks caps a hit at the
// prompt's length minus one). A router that places each prefix on one
// engine does no better; blocks held by running requests only lower it.
func hitCeiling(prompts sim.Workload, caches EngineCaches) float64 {
	bs := caches.BlockSize
	lru := list.New()
	where := map[uint64]*list.Element{}
	var queries, hits int
	var buf []uint32
	for i := range prompts.Len() {
		buf = prompts.Prompt(i, buf)
		queries += len(buf)
		h := fnv.New64a()
		var word [4]byte
		hitting := true
		for b := 0; (b+1)*bs <= len(buf); b++ {
			for _, id := range buf[b*bs : (b+1)*bs] {
				binary.LittleEndian.PutUint32(word[:], id)
				h.Write(word[:])
			}
			key := h.Sum64()
			if e, ok := where[key]; ok {
				lru.MoveToFront(e)
				if hitting && (b+1)*bs <= len(buf)-1 {
					hits += bs
				}
				continue
			}
			hitting = false
			where[key] = lru.PushFront(key)
			if lru.Len() > caches.Blocks {
				delete(where, lru.Remove(lru.Back()).(uint64))
			}
		}
	}
	if queries == 0 {
		return 0
	}
	return float64(hits) / float64(queries)
}
