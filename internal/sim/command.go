package sim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// Command is `llmd-router sim`: it serves simulated replicas, or with
// -virtual runs the benchmark workload in virtual time, or with -calibrate
// prints the calibration table against the seed baseline.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := DefaultEngineConfig()
	var (
		replicas    = fs.Int("replicas", 1, "number of replicas in this process")
		host        = fs.String("host", "127.0.0.1", "address every socket binds")
		httpPort    = fs.Int("port", 8001, "HTTP port of replica 0 (replica i: port+i; 0 picks free ports); 8001 leaves vLLM's 8000 to llmd-router serve")
		kvPort      = fs.Int("kv-port", 5557, "KV-event PUB port of replica 0 (replica i: kv-port+2i, replay kv-port+2i+1; 0 picks free ports)")
		noReplay    = fs.Bool("no-replay", false, "do not serve KV-event replay")
		model       = fs.String("model", "Qwen/Qwen2.5-7B-Instruct", "served model name")
		adapters    = fs.String("lora-adapters", "", "comma-separated LoRA adapter names served on top of the model")
		tokPath     = fs.String("tokenizer", "", "tokenizer.json for text prompts (without it, prompts must be token ids)")
		tokConfig   = fs.String("tokenizer-config", "", "tokenizer_config.json whose chat template serves chat requests (needs -tokenizer)")
		form        = fs.String("kv-events-form", "map", "KV-event wire form: map (vLLM ~0.26 on) or array (legacy)")
		bufferSteps = fs.Int("buffer-steps", DefaultBufferSteps, "KV-event messages kept for replay")
		timeScale   = fs.Float64("time-scale", 1, "simulated seconds per wall-clock second")
		blocks      = fs.Int("num-gpu-blocks", def.NumGPUBlocks, "KV-cache capacity in blocks (default derived for Qwen2.5-7B on an A10G at the block size; -virtual and -calibrate: at the seed's 64)")
		blockSize   = fs.Int("block-size", def.BlockSize, "tokens per KV block (-virtual and -calibrate: the seed's 64)")
		maxSeqs     = fs.Int("max-num-seqs", def.MaxNumSeqs, "maximum running sequences")
		maxTokens   = fs.Int("max-num-batched-tokens", def.MaxBatchedTokens, "per-step token budget")
		policy      = fs.String("scheduling-policy", string(PolicyFCFS), "vLLM's --scheduling-policy: fcfs, or priority (the waiting queue and preemption follow each request's priority field)")
		longPrefill = fs.Int("long-prefill-token-threshold", 0, "vLLM's --long-prefill-token-threshold: the most prompt tokens one request computes in a step while others run or wait (0: no cap)")
		seed        = fs.Uint64("seed", 1, "seed for hash roots, workload and picker")
		virtual     = fs.Bool("virtual", false, "run the workload in virtual time and print the summary")
		calibrate   = fs.Bool("calibrate", false, "print the calibration table against the seed baseline")
		picker      = fs.String("picker", "kube-proxy", "virtual mode: kube-proxy, round-robin or random")
		concurrency = fs.Int("max-concurrency", 512, "virtual mode: client connections")
		rate        = fs.Float64("request-rate", 0, "virtual mode: Poisson arrivals per second (0: all at once)")
		delay       = fs.Duration("event-delay", 10*time.Millisecond, "virtual mode: KV-event delivery delay")
		numPrompts  = fs.Int("num-prompts", 9000, "virtual mode: prompts")
		numPrefixes = fs.Int("prefix-repetition-num-prefixes", 150, "virtual mode: distinct prefixes")
		prefixLen   = fs.Int("prefix-repetition-prefix-len", 2048, "virtual mode: prefix tokens")
		suffixLen   = fs.Int("prefix-repetition-suffix-len", 128, "virtual mode: suffix tokens")
		outputLen   = fs.Int("prefix-repetition-output-len", 256, "virtual mode: output tokens")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Served replicas default to vLLM's block size; the benchmark runs
	// default to the seed's engine. Flags given explicitly win either way.
	ec := def
	if *virtual || *calibrate {
		ec = SeedEngineConfig()
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "num-gpu-blocks":
			ec.NumGPUBlocks = *blocks
		case "block-size":
			ec.BlockSize = *blockSize
			if !isSet(fs, "num-gpu-blocks") {
				g := DefaultA10G()
				g.BlockSize = *blockSize
				ec.NumGPUBlocks = g.GPUBlocks()
			}
		case "max-num-seqs":
			ec.MaxNumSeqs = *maxSeqs
		case "max-num-batched-tokens":
			ec.MaxBatchedTokens = *maxTokens
		}
	})
	ec.Seed = *seed
	ec.Policy = SchedulingPolicy(*policy)
	ec.LongPrefillTokenThreshold = *longPrefill
	wf := kvevents.FormMap
	switch *form {
	case "map":
	case "array":
		wf = kvevents.FormArray
	default:
		return fmt.Errorf("-kv-events-form %q: want map or array", *form)
	}
	if *calibrate {
		rep, err := Calibrate(ec, *seed)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, rep.Markdown())
		return err
	}
	if *virtual {
		p, err := NewPicker(*picker, *seed)
		if err != nil {
			return err
		}
		w := PrefixRepetition{NumPrefixes: *numPrefixes, PrefixLen: *prefixLen, SuffixLen: *suffixLen,
			OutputLen: *outputLen, NumPrompts: *numPrompts, Seed: *seed}
		start := time.Now()
		res, err := RunVirtual(VirtualConfig{Engine: ec, Replicas: *replicas, Workload: w, Concurrency: *concurrency,
			RequestRate: *rate, Picker: p, EventDelay: delay.Seconds(), Form: wf, Seed: *seed})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "virtual run took %s of wall time\n", time.Since(start).Round(time.Millisecond))
		return json.NewEncoder(stdout).Encode(res)
	}
	rc := ReplicaConfig{Model: *model, Adapters: adapterList(*adapters), Engine: ec, TimeScale: *timeScale, Form: wf,
		BufferSteps: *bufferSteps}
	switch {
	case *tokConfig != "" && *tokPath == "":
		return errors.New("-tokenizer-config needs -tokenizer")
	case *tokConfig != "":
		m, err := chat.LoadModel(*tokPath, *tokConfig, chat.Options{})
		if err != nil {
			return fmt.Errorf("loading chat model: %w", err)
		}
		rc.Chat = m
	case *tokPath != "":
		tok, err := tokenizer.Load(*tokPath)
		if err != nil {
			return fmt.Errorf("loading tokenizer: %w", err)
		}
		rc.Tokenizer = tok
	}
	f, err := StartFleet(FleetConfig{Replica: rc, Replicas: *replicas, Host: *host, HTTPPort: *httpPort, KVPort: *kvPort, NoReplay: *noReplay})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for _, info := range f.Infos {
		if err := enc.Encode(info); err != nil {
			return err
		}
	}
	return f.Serve(ctx)
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// adapterList splits a comma- or space-separated list of adapter names.
func adapterList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}
