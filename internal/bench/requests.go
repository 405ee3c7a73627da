package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// requests is what the live client sends: request numbers handed out as
// they become ready, and each one's HTTP body.
type requests interface {
	Len() int
	// take returns the next request ready to send, waiting for it; false
	// when every request was handed out (or dropped) or ctx ended.
	take(ctx context.Context) (int, bool)
	// body is request i's path and JSON body.
	body(i int, model string) (path string, body []byte, err error)
	// finished reports request i's end: its reply text when ok.
	finished(i int, reply string, ok bool)
	// wantsReply says finished needs the reply text.
	wantsReply() bool
	// taken counts the requests handed out so far.
	taken() int
	// begin starts the clock of arrivals (and first turns) at start.
	begin(ctx context.Context, start time.Time)
}

// completionRequest is a /v1/completions body: exact output length.
type completionRequest struct {
	Model         string        `json:"model"`
	Prompt        any           `json:"prompt,omitempty"`
	Messages      []chatMessage `json:"messages,omitempty"`
	MaxTokens     int           `json:"max_tokens"`
	IgnoreEOS     bool          `json:"ignore_eos"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatMessage is one OpenAI chat message.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func marshalRequest(model string, prompt any, msgs []chatMessage, maxTokens int) ([]byte, error) {
	req := completionRequest{Model: model, Prompt: prompt, Messages: msgs, MaxTokens: maxTokens, IgnoreEOS: true, Stream: true}
	req.StreamOptions.IncludeUsage = true
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding a request: %w", err)
	}
	return body, nil
}

// completions is a fixed list of independent completion prompts, each sent
// when its Poisson arrival time has come (all at once at rate inf).
type completions struct {
	work     sim.Workload
	text     func(i int) string // nil: token-id prompts
	arrivals []time.Duration    // offsets from start; nil: all ready at once
	start    time.Time
	next     atomic.Int64 // the next request number to hand out
	handed   atomic.Int64 // requests handed out once their arrival came
}

func (c *completions) Len() int                                 { return c.work.Len() }
func (c *completions) wantsReply() bool                         { return false }
func (c *completions) taken() int                               { return int(c.handed.Load()) }
func (c *completions) finished(int, string, bool)               {}
func (c *completions) begin(_ context.Context, start time.Time) { c.start = start }

func (c *completions) take(ctx context.Context) (int, bool) {
	i := int(c.next.Add(1) - 1)
	if i >= c.work.Len() || ctx.Err() != nil {
		return 0, false
	}
	if c.arrivals != nil {
		if !sleepUntil(ctx, c.start.Add(c.arrivals[i])) {
			return 0, false
		}
	}
	c.handed.Add(1)
	return i, true
}

func (c *completions) body(i int, model string) (string, []byte, error) {
	var prompt any
	if c.text != nil {
		prompt = c.text(i)
	} else {
		prompt = c.work.Prompt(i, nil)
	}
	b, err := marshalRequest(model, prompt, nil, c.work.OutputLen(i))
	return "/v1/completions", b, err
}

// conversations is the multi-turn workload: turn t+1 of a conversation is
// ready when turn t's reply is in, and carries the whole conversation so
// far, replies included, as a chat request. Request i is turn i%turns of
// conversation i/turns. A conversation whose turn failed ends there.
type conversations struct {
	system    []string
	users     [][]string // [conversation][turn]
	outputLen int

	ready     chan int
	arrivals  []time.Duration // per conversation; nil: all start at once
	seed      uint64          // of the conversations' order
	handed    atomic.Int64
	remaining atomic.Int64 // turns not yet handed out or dropped
	allOut    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	replies [][]string // [conversation][turn]
}

// buildConversations draws the conversations' texts (every span of exact
// length) and orders their first turns at random.
func buildConversations(w Workload, tok *tokenizer.Tokenizer) (*conversations, error) {
	if tok == nil {
		return nil, fmt.Errorf("the %s workload sends text: it needs the model's tokenizer (--tokenizer)", DatasetMultiTurn)
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	turns := w.NumPrompts / w.NumPrefixes
	b := textBuilder{tok: tok, rng: rand.New(rand.NewPCG(w.Seed, 0x636f6e76))}
	c := &conversations{system: make([]string, w.NumPrefixes), users: make([][]string, w.NumPrefixes),
		replies: make([][]string, w.NumPrefixes), outputLen: w.OutputLen, ready: make(chan int, w.NumPrefixes*turns),
		allOut: make(chan struct{})}
	text := func(n int) (string, error) {
		ids, _, err := b.exactSpan(n)
		if err != nil {
			return "", err
		}
		return b.decode(ids)
	}
	for k := range c.system {
		var err error
		if c.system[k], err = text(w.PrefixLen); err != nil {
			return nil, err
		}
		c.users[k] = make([]string, turns)
		c.replies[k] = make([]string, turns)
		for t := range c.users[k] {
			if c.users[k][t], err = text(w.SuffixLen); err != nil {
				return nil, err
			}
		}
	}
	c.remaining.Store(int64(w.NumPrefixes * turns))
	return c, nil
}

// begin queues every conversation's first turn in a random order; with
// arrivals, the n-th conversation starts at the n-th offset.
func (c *conversations) begin(ctx context.Context, start time.Time) {
	order := rand.New(rand.NewPCG(c.seed, 0x6f72646572)).Perm(len(c.system))
	if c.arrivals == nil {
		for _, k := range order {
			c.ready <- k * c.turns()
		}
		return
	}
	go func() {
		for n, k := range order {
			if !sleepUntil(ctx, start.Add(c.arrivals[n])) {
				return
			}
			c.ready <- k * c.turns()
		}
	}()
}

func (c *conversations) turns() int       { return len(c.users[0]) }
func (c *conversations) Len() int         { return len(c.system) * c.turns() }
func (c *conversations) wantsReply() bool { return true }
func (c *conversations) taken() int       { return int(c.handed.Load()) }

func (c *conversations) take(ctx context.Context) (int, bool) {
	select {
	case i := <-c.ready:
		c.handed.Add(1)
		c.drop(1)
		return i, true
	case <-c.allOut:
		return 0, false
	case <-ctx.Done():
		return 0, false
	}
}

// drop counts n turns as handed out or never to be sent.
func (c *conversations) drop(n int) {
	if c.remaining.Add(-int64(n)) <= 0 {
		c.closeOnce.Do(func() { close(c.allOut) })
	}
}

func (c *conversations) finished(i int, reply string, ok bool) {
	k, t := i/c.turns(), i%c.turns()
	if !ok {
		c.drop(c.turns() - 1 - t)
		return
	}
	c.mu.Lock()
	c.replies[k][t] = reply
	c.mu.Unlock()
	if t+1 < c.turns() {
		c.ready <- i + 1
	}
}

// messages is turn t of conversation k: the system prompt, then each
// earlier turn's user message and reply, then turn t's user message.
func (c *conversations) messages(k, t int) []chatMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := make([]chatMessage, 0, 2+2*t)
	msgs = append(msgs, chatMessage{Role: "system", Content: c.system[k]})
	for j := range t {
		msgs = append(msgs, chatMessage{Role: "user", Content: c.users[k][j]},
			chatMessage{Role: "assistant", Content: c.replies[k][j]})
	}
	return append(msgs, chatMessage{Role: "user", Content: c.users[k][t]})
}

func (c *conversations) body(i int, model string) (string, []byte, error) {
	b, err := marshalRequest(model, nil, c.messages(i/c.turns(), i%c.turns()), c.outputLen)
	return "/v1/chat/completions", b, err
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
