package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// IndependentRow is one published measurement of vLLM on an A10 or A10G
// that is not the seed (BENCHMARK.md), as its source ran it: the model,
// vLLM's engine settings of the version it ran, the prompt and output
// lengths, the client and its concurrency, and the figure as the source
// states and measures it. The simulator reproduces each row to pin the
// cost model without the seed's routed side (BENCHMARKS.md, issue 29
// item 1, gives the sources and the criterion).
type IndependentRow struct {
	// Label names the row in reports: source and concurrency.
	Label string
	// Model is what the source served; the GPU is A10G's figures.
	Model ModelShape
	// MaxBatchedTokens is the per-step token budget of the vLLM version
	// the source ran: V0 without chunked prefill admits a step of up to
	// max(max_model_len, 2,048) prompt tokens.
	MaxBatchedTokens int
	// PromptLen and OutputLen are tokens of the served model's tokenizer,
	// chat template included; every request generates OutputLen.
	PromptLen, OutputLen int
	// Client is how the source's benchmark sent its requests.
	Client IndependentClient
	// Stated is the source's figure, in Unit.
	Stated float64
	Unit   string
	// StatedTTFT is the source's mean time to first token, seconds (0:
	// not stated).
	StatedTTFT float64
	// Unrepresented, when set, says why the simulator does not reproduce
	// the source's run: the row is printed beside the others, not bounded.
	Unrepresented string
}

// IndependentClient is a benchmark client: when it sends requests, and
// which figure it computes from them.
type IndependentClient interface {
	// start queues the first requests.
	start(s *singleRun)
	// finished is called as a request ends at engine time now.
	finished(s *singleRun, r *Request, now float64)
	// figure is the source's figure over every finished request.
	figure(reqs []*Request) float64
}

// BackToBack is c client threads, each sending PerClient requests one
// after the other, all with one fixed prompt (NetEase-Media/grps_trtllm's
// client/openai_benchmark.py). Its figure is that script's "Average
// Speed": the mean over requests of (prompt + completion tokens) over
// latency, times c.
type BackToBack struct {
	Concurrency, PerClient int
}

func (b BackToBack) start(s *singleRun) {
	for range b.Concurrency {
		s.send(0, -1)
	}
}

func (b BackToBack) finished(s *singleRun, r *Request, now float64) {
	if s.sentBy[s.client[r.ID]] < b.PerClient {
		s.send(now, s.client[r.ID])
	}
}

func (b BackToBack) figure(reqs []*Request) float64 {
	var sum float64
	for _, r := range reqs {
		sum += float64(len(r.Prompt)+r.Output) / (r.Done - r.Arrival)
	}
	return sum / float64(len(reqs)) * float64(b.Concurrency)
}

// Waves is llmperf's client (philschmid/llmperf, token_benchmark_ray.py):
// Waves rounds of Concurrency requests with distinct prompts, each round
// launched one request every Spacing seconds and drained to the last
// request before the next begins. Its figure is llmperf's inter-token
// latency: the mean over requests of end-to-end latency over the output
// tokens as llmperf counts them (with the Llama-2 tokenizer, CountedOutput
// on average for the row's OutputLen tokens).
type Waves struct {
	Concurrency, Waves int
	Spacing            float64
	CountedOutput      float64
}

func (w Waves) start(s *singleRun) { w.launch(s, 0) }

func (w Waves) launch(s *singleRun, at float64) {
	for i := range w.Concurrency {
		s.send(at+float64(i)*w.Spacing, -1)
	}
}

func (w Waves) finished(s *singleRun, _ *Request, now float64) {
	if s.inFlight == 0 && len(s.reqs) < w.Concurrency*w.Waves {
		w.launch(s, now)
	}
}

func (w Waves) figure(reqs []*Request) float64 {
	var sum float64
	for _, r := range reqs {
		sum += (r.Done - r.Arrival) / w.CountedOutput
	}
	return 1e3 * sum / float64(len(reqs))
}

// WavesFromStated is llmperf's schedule at concurrency c as a row's stated
// figures imply it: requests over c waves; each wave lasts 60c/qpm
// seconds, of which the mean request's latency (itl ms x counted tokens)
// covers the end, so the launches are spread evenly over the rest (none
// when the latency covers it all).
func WavesFromStated(c, requests int, qpm, itlMs, counted float64) Waves {
	wave := 60 * float64(c) / qpm
	latency := itlMs / 1e3 * counted
	return Waves{Concurrency: c, Waves: requests / c, Spacing: max(0, wave-latency) / float64(c-1), CountedOutput: counted}
}

// IndependentRows are the rows of BENCHMARK.md the simulator reproduces.
// The TGI rows (philschmid/text-generation-inference-tests) are left out:
// TGI 1.0.3's scheduler, sampling, and ShareGPT prompts of unstated length
// are not what the simulator models (BENCHMARKS.md gives the reasons).
func IndependentRows() []IndependentRow {
	// NetEase-Media/grps_trtllm docs/performance.md: xinference 1.1.1 on
	// vLLM 0.6.6, prefix caching on, one A10; "fixed input of an article
	// of about 1.2k tokens, output a summary of about 190 tokens", 10
	// requests per thread. vLLM 0.6.6 leaves chunked prefill off for
	// Qwen2.5's max_model_len of 32,768 (on only above 32K), so a step
	// takes up to 32,768 prompt tokens.
	grps := func(c int, stated float64) IndependentRow {
		return IndependentRow{Label: fmt.Sprintf("grps_trtllm xinference-vLLM 0.6.6, c=%d", c), Model: Qwen25_7B,
			MaxBatchedTokens: 32768, PromptLen: 1200, OutputLen: 190,
			Client: BackToBack{Concurrency: c, PerClient: 10}, Stated: stated, Unit: "tok/s"}
	}
	// philschmid/llmperf benchmarks/results/a10g/vllm-...-8B-Instruct.csv:
	// vLLM 0.4.3 defaults (no chunked prefill; max_model_len 8,192), one
	// A10G; 550 prompt and 150 output tokens by the Llama-2 tokenizer,
	// stddev 0. Every request ran to max_tokens 150 (Llama-3 tokens),
	// which llmperf counted as the csv's mean output length; the prompt in
	// Llama-3 tokens is 550 x 150/177 = 466, plus 14 of the chat template
	// around an empty system message and the user turn: 480.
	llmperf := func(c, requests int, qpm, itl, counted, ttftMs float64) IndependentRow {
		return IndependentRow{Label: fmt.Sprintf("llmperf vLLM 0.4.3, c=%d", c), Model: Llama3_8B,
			MaxBatchedTokens: 8192, PromptLen: 480, OutputLen: 150,
			Client: WavesFromStated(c, requests, qpm, itl, counted), Stated: itl, Unit: "ms ITL", StatedTTFT: ttftMs / 1e3,
			Unrepresented: "llmperf's launches within a wave are not stated; spread evenly, they give a mean TTFT " +
				"a third to an eighth of the source's, so the schedule the server saw was another"}
	}
	return []IndependentRow{
		grps(1, 217.51),
		grps(8, 1616.11),
		grps(16, 3009.80),
		// Concurrency, requests (the csv's mean output length is a sum
		// over 112 or 128 requests), requests per minute, ITL, tokens,
		// mean TTFT.
		llmperf(16, 112, 98.20768487611645, 42.668423107195636, 177.09821428571428, 302.7480912588609),
		llmperf(32, 128, 123.17320599883152, 50.154911587173835, 177.3046875, 319.6774275156855),
		llmperf(64, 128, 102.6630805720438, 61.72701229143614, 176.0234375, 1080.4201672266204),
	}
}

// RowResult is a row as the simulator ran it.
type RowResult struct {
	// Figure is the row's figure, computed as its source computes it.
	Figure float64
	// MeanTTFT is the mean time to first token, seconds; MeanRunning the
	// mean number of sequences per step; Preemptions the engine's count.
	MeanTTFT, MeanRunning float64
	Requests, Preemptions int
}

// Error is the simulated figure's error against the stated one, percent.
func (r RowResult) Error(row IndependentRow) float64 { return pct(r.Figure, row.Stated) }

// Run reproduces the row on one engine priced by the model's cost with f.
func (row IndependentRow) Run(f Fitted) (RowResult, error) {
	g := DefaultA10G()
	g.WeightBytes = row.Model.Params * float64(row.Model.BytesPerValue)
	g.KVBytesPerToken = row.Model.KVBytesPerToken()
	ec := EngineConfig{NumGPUBlocks: g.GPUBlocks(), BlockSize: g.BlockSize, MaxNumSeqs: 256,
		MaxBatchedTokens: row.MaxBatchedTokens, Cost: row.Model.Cost(A10G, f), Seed: 1}
	e, err := NewEngine(ec)
	if err != nil {
		return RowResult{}, err
	}
	s := &singleRun{e: e, row: &row, rng: rand.New(rand.NewPCG(1, 2))}
	if _, shared := row.Client.(BackToBack); shared {
		s.shared = s.prompt()
	}
	row.Client.start(s)
	if err := s.run(); err != nil {
		return RowResult{}, fmt.Errorf("%s: %w", row.Label, err)
	}
	res := RowResult{Figure: row.Client.figure(s.reqs), Requests: len(s.reqs), Preemptions: int(e.Stats().Preemptions),
		MeanRunning: s.seqSteps / float64(e.Stats().Steps)}
	for _, r := range s.reqs {
		res.MeanTTFT += (r.FirstToken - r.Arrival) / float64(len(s.reqs))
	}
	return res, nil
}

// singleRun drives one engine in virtual time for a client.
type singleRun struct {
	e        *Engine
	row      *IndependentRow
	rng      *rand.Rand
	shared   []uint32 // the one prompt of a fixed-prompt client
	now      float64
	pending  []*Request // sent, not yet arrived, by arrival time
	reqs     []*Request // every request sent
	client   []int      // request ID -> client thread
	sentBy   []int      // client thread -> requests sent
	inFlight int
	seqSteps float64 // sum over steps of scheduled sequences
}

// prompt is a prompt of the row's length, distinct from any other.
func (s *singleRun) prompt() []uint32 {
	return randomTokens(s.rng, make([]uint32, s.row.PromptLen, s.row.PromptLen+s.row.OutputLen))
}

// send queues a request arriving at engine time at, from client thread
// from (-1: a new thread).
func (s *singleRun) send(at float64, from int) {
	p := s.shared
	if p == nil {
		p = s.prompt()
	} else {
		p = append(make([]uint32, 0, len(p)+s.row.OutputLen), p...)
	}
	id := uint64(len(s.reqs))
	if from < 0 {
		from = len(s.sentBy)
		s.sentBy = append(s.sentBy, 0)
	}
	s.sentBy[from]++
	s.client = append(s.client, from)
	r := &Request{ID: id, Prompt: p, MaxTokens: s.row.OutputLen, Arrival: at}
	s.reqs = append(s.reqs, r)
	s.inFlight++
	i, _ := slices.BinarySearchFunc(s.pending, at, func(r *Request, t float64) int {
		if r.Arrival <= t {
			return -1
		}
		return 1
	})
	s.pending = slices.Insert(s.pending, i, r)
}

// run steps the engine until every request the client sends has finished.
func (s *singleRun) run() error {
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			return fmt.Errorf("no end after %d steps", steps)
		}
		for len(s.pending) > 0 && s.pending[0].Arrival <= s.now {
			if err := s.e.Add(s.pending[0]); err != nil {
				return err
			}
			s.pending = s.pending[1:]
		}
		d, ok := s.e.Schedule()
		if !ok {
			if len(s.pending) == 0 {
				return nil
			}
			s.now = s.pending[0].Arrival
			continue
		}
		s.seqSteps += float64(s.e.shape.Seqs)
		s.now += d
		_, progress := s.e.Finish(s.now)
		var done []*Request
		for _, r := range progress {
			if r.Finished() && r.Done == s.now {
				done = append(done, r)
			}
		}
		for _, r := range done {
			s.inFlight--
			s.row.Client.finished(s, r, s.now)
		}
	}
}
