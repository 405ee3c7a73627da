package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// ClassShare is one priority class of a PriorityMix and the share of the
// requests that name it.
type ClassShare struct {
	Class string  `json:"class"`
	Share float64 `json:"share"`
}

// PriorityMix is the client's priority classes (--priority-mix): each
// request names one in the router's priority header, drawn with the
// classes' shares from the workload's seed. Empty: no request names one
// (the router's default class).
type PriorityMix []ClassShare

// mixExample is what an error about --priority-mix shows as the fix.
const mixExample = "e.g. --priority-mix high=0.2,low=0.8 (the router's class names, shares summing to 1)"

// ParsePriorityMix parses --priority-mix: comma-separated NAME=SHARE
// entries, e.g. high=0.2,low=0.8; "" is no mix.
func ParsePriorityMix(s string) (PriorityMix, error) {
	var m PriorityMix
	for _, entry := range splitList(s) {
		name, share, ok := strings.Cut(entry, "=")
		v, err := strconv.ParseFloat(strings.TrimSpace(share), 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("--priority-mix %q: entry %q is not NAME=SHARE; %s", s, entry, mixExample)
		}
		m = append(m, ClassShare{Class: strings.TrimSpace(name), Share: v})
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// check says what is wrong with the mix, naming the flag and the fix.
func (m PriorityMix) check() error {
	if len(m) == 0 {
		return nil
	}
	sum := 0.0
	for i, c := range m {
		switch {
		case c.Class == "":
			return fmt.Errorf("--priority-mix: entry %d has no class name; %s", i+1, mixExample)
		case !(c.Share > 0 && c.Share <= 1):
			return fmt.Errorf("--priority-mix: class %s's share %g is not in (0, 1]; %s", c.Class, c.Share, mixExample)
		case slices.ContainsFunc(m[:i], func(o ClassShare) bool { return o.Class == c.Class }):
			return fmt.Errorf("--priority-mix: class %s is named twice; %s", c.Class, mixExample)
		}
		sum += c.Share
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("--priority-mix: the shares sum to %.4g, not 1; %s", sum, mixExample)
	}
	return nil
}

// String is the mix in --priority-mix's form.
func (m PriorityMix) String() string {
	parts := make([]string, len(m))
	for i, c := range m {
		parts[i] = c.Class + "=" + strconv.FormatFloat(c.Share, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// assign draws the class of each of n requests from seed, request i's at
// index i; nil without a mix.
func (m PriorityMix) assign(seed uint64, n int) []string {
	if len(m) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x7072696f))
	out := make([]string, n)
	for i := range out {
		u, j := rng.Float64(), 0
		for ; j < len(m)-1 && u >= m[j].Share; j++ {
			u -= m[j].Share
		}
		out[i] = m[j].Class
	}
	return out
}

// mixFlag is --priority-mix as a flag.Value.
type mixFlag struct{ m *PriorityMix }

func (f mixFlag) String() string {
	if f.m == nil {
		return ""
	}
	return f.m.String()
}

func (f mixFlag) Set(s string) (err error) {
	*f.m, err = ParsePriorityMix(s)
	return err
}

// listFlag is a repeatable flag: each use adds one value.
type listFlag struct{ list *[]string }

func (f listFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, " ")
}

func (f listFlag) Set(s string) error {
	*f.list = append(*f.list, s)
	return nil
}

// outcome is how one request ended.
type outcome int

const (
	outServed  outcome = iota // streamed to its end
	outShed429                // refused with 429 (over its share)
	outShed503                // refused with 503 (no room in time)
	outFailed                 // any other answer, or one the client could not read
	outLost                   // no answer: a transport error, or a stream cut short
	numOutcomes
)

// outcomeOf is the outcome of an answer with a status other than 200.
func outcomeOf(status int) outcome {
	switch status {
	case http.StatusTooManyRequests:
		return outShed429
	case http.StatusServiceUnavailable:
		return outShed503
	}
	return outFailed
}

// shed says o is admission's refusal, which is neither a failure nor a loss.
func (o outcome) shed() bool { return o == outShed429 || o == outShed503 }

// tally counts one class's requests by outcome, and those whose answer
// carried Retry-After.
type tally struct{ n, retryAfter [numOutcomes]int }

func (t *tally) add(o outcome, retryAfter bool) {
	t.n[o]++
	if retryAfter {
		t.retryAfter[o]++
	}
}

// ClassSummary is one priority class's part of a run: how its requests
// ended and the TTFT of those served (milliseconds).
type ClassSummary struct {
	Class  string `json:"class"`
	Sent   int    `json:"sent"`
	Served int    `json:"served"`
	// Shed429 and Shed503 count the requests refused with each status;
	// the RetryAfter counts, those of them whose answer carried
	// Retry-After.
	Shed429           int `json:"shed_429"`
	Shed429RetryAfter int `json:"shed_429_retry_after"`
	Shed503           int `json:"shed_503"`
	Shed503RetryAfter int `json:"shed_503_retry_after"`
	// Failed got another answer; Lost got none (transport error or a
	// stream cut short).
	Failed   int     `json:"failed"`
	Lost     int     `json:"lost"`
	MeanTTFT float64 `json:"mean_ttft_ms"`
	P99TTFT  float64 `json:"p99_ttft_ms"`
	// P99TTFTByTenth is the P99 TTFT of the served requests sent in each
	// tenth of the class's sending period, first to last (0 for a tenth
	// with none): where in the run the class's tail is.
	P99TTFTByTenth []float64 `json:"p99_ttft_ms_by_tenth,omitempty"`
}

// tenths is the number of arrival windows of ClassSummary.P99TTFTByTenth.
const tenths = 10

// p99ByTenth is P99TTFTByTenth of recs (one class's served requests); nil
// for none.
func p99ByTenth(recs []Record) []float64 {
	if len(recs) == 0 {
		return nil
	}
	first, last := recs[0].Sent, recs[0].Sent
	for _, r := range recs {
		first, last = min(first, r.Sent), max(last, r.Sent)
	}
	windows := make([][]float64, tenths)
	for _, r := range recs {
		i := tenths - 1
		if last > first {
			i = min(tenths-1, int(tenths*(r.Sent-first)/(last-first)))
		}
		windows[i] = append(windows[i], 1e3*(r.FirstToken-r.Sent))
	}
	out := make([]float64, tenths)
	for i, w := range windows {
		if len(w) > 0 {
			_, _, out[i] = sim.MeanMedianP99(w)
		}
	}
	return out
}

// classSummaries is each class of mix's summary, in the mix's order, from
// the tallies by class and the served records; nil without a mix.
func classSummaries(mix PriorityMix, tallies map[string]*tally, recs []Record) []ClassSummary {
	var out []ClassSummary
	for _, c := range mix {
		t := tallies[c.Class]
		if t == nil {
			t = &tally{}
		}
		s := ClassSummary{Class: c.Class, Served: t.n[outServed], Shed429: t.n[outShed429],
			Shed429RetryAfter: t.retryAfter[outShed429], Shed503: t.n[outShed503],
			Shed503RetryAfter: t.retryAfter[outShed503], Failed: t.n[outFailed], Lost: t.n[outLost]}
		for _, n := range t.n {
			s.Sent += n
		}
		var ttft []float64
		var mine []Record
		for _, r := range recs {
			if r.Class == c.Class {
				ttft = append(ttft, 1e3*(r.FirstToken-r.Sent))
				mine = append(mine, r)
			}
		}
		s.MeanTTFT, _, s.P99TTFT = sim.MeanMedianP99(ttft)
		s.P99TTFTByTenth = p99ByTenth(mine)
		out = append(out, s)
	}
	return out
}

// WriteClassTable prints, when the run had a priority mix, one row per
// policy and class: requests sent, served, shed with 429 and 503 (with
// how many carried Retry-After), failed, lost, and the served requests'
// mean and P99 TTFT.
func WriteClassTable(w io.Writer, rep Report) error {
	if !slices.ContainsFunc(rep.Policies, func(s Summary) bool { return len(s.Classes) > 0 }) {
		return nil
	}
	fmt.Fprintln(w, "\n| policy | class | sent | served | shed 429 (with Retry-After) | shed 503 (with Retry-After) | failed | lost | mean TTFT ms | P99 TTFT ms |")
	if _, err := fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, s := range rep.Policies {
		for _, c := range s.Classes {
			if _, err := fmt.Fprintf(w, "| %s | %s | %d | %d | %d (%d) | %d (%d) | %d | %d | %.0f | %.0f |\n",
				s.Policy, c.Class, c.Sent, c.Served, c.Shed429, c.Shed429RetryAfter, c.Shed503, c.Shed503RetryAfter,
				c.Failed, c.Lost, c.MeanTTFT, c.P99TTFT); err != nil {
				return err
			}
		}
	}
	return nil
}
