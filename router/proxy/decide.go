package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Pick is one committed decision taken for a front that does not forward
// the request itself (package picker, the gateway's endpoint picker): the
// same parsing, breakers, in-flight caps and queue, scoring and speculation
// as a request the proxy forwards, with the forwarding left to the gateway.
type Pick struct {
	// Pod is the chosen pod; DPRank its data-parallel rank (-1: none).
	Pod    string
	DPRank int
	// Fallbacks are the other candidates the decision scored (healthy, under
	// their cap, inside the allowed set), best first: the gateway tries them
	// in order when Pod fails.
	Fallbacks []string
	// Decision is the scored decision behind Pod.
	Decision scoring.Decision

	srv              *Server
	req              *scoring.Request
	top              bool // of the class the admission holds apart (admission.leads)
	once             sync.Once
	started, release func()
}

// Started marks Pod's first response byte: the request's prefill is done
// and its speculative index entries start their TTL.
func (p *Pick) Started() { p.started() }

// Release ends the request: Pod's in-flight slot is freed (and the
// speculation settled, if Started was never called). Later calls do nothing.
func (p *Pick) Release() { p.once.Do(p.release) }

// Served tells the pick that pod, not Pod, served the request (the gateway
// fell back down the endpoint list): Pod's slot is freed and its
// speculation settled, and pod counts the request in flight and holds its
// speculation instead, until Started or Release. A pod that left the fleet
// is ignored. Call it before Started.
func (p *Pick) Served(pod string) {
	if pod == p.Pod {
		return
	}
	if _, ok := p.srv.cfg.Fleet.Target(pod); !ok {
		return
	}
	p.Release()
	started, end := p.srv.cfg.Fleet.Begin(pod, p.Decision.UncachedTokens, p.top)
	hold := p.srv.cfg.Picker.SpeculateOn(p.req, pod, -1)
	p.Pod, p.DPRank = pod, -1
	p.once = sync.Once{}
	p.started = func() { started(); hold.Settle() }
	p.release = func() { hold.Settle(); end() }
}

// ErrInvalidRequest wraps a body the engine would refuse (HTTP 400).
var ErrInvalidRequest = errors.New("invalid request")

// Decide takes the routing decision for body, a request to path
// (chat.PathCompletions or chat.PathChatCompletions), as the proxy takes it
// for a request it forwards, and commits it: the pod's in-flight slot is
// taken and the index holds the speculation until Release or Started.
// allowed, when not nil, restricts the candidates (the gateway's subset).
// Errors map to an HTTP status with DecisionStatus. ctx bounds a wait in
// the queue, where the request waits in flow's class and tenant (Flow).
func (s *Server) Decide(ctx context.Context, path string, body []byte, allowed func(pod string) bool, flow Flow) (*Pick, error) {
	if int64(len(body)) > s.cfg.MaxBodyBytes {
		s.cfg.Metrics.decision(outcomeInvalid)
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, s.cfg.MaxBodyBytes)
	}
	req, err := s.parse(path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	// Pods outside the allowed set are "tried" for the chooser: never
	// scored, never waited for in the queue.
	var excluded []string
	if allowed != nil {
		for _, p := range s.cfg.Fleet.Pods(nil) {
			if !allowed(p.Name) {
				excluded = append(excluded, p.Name)
			}
		}
	}
	sl, err := s.routeChooser(req, flow)(ctx, excluded)
	if err != nil {
		return nil, err
	}
	if len(excluded) > 0 {
		s.cfg.Metrics.decided(sl.decision) // the chooser counts first attempts only
	}
	return &Pick{Pod: sl.pod, DPRank: sl.dpRank, Fallbacks: fallbacks(sl.decision), Decision: *sl.decision,
		srv: s, req: req, top: s.adm.leads(flow.Class), started: sl.started, release: sl.release}, nil
}

// fallbacks lists d's candidates other than the chosen one, best total
// first (ties in candidate order).
func fallbacks(d *scoring.Decision) []string {
	rest := make([]scoring.PodScore, 0, len(d.Scores))
	for i, ps := range d.Scores {
		if i != d.Chosen {
			rest = append(rest, ps)
		}
	}
	slices.SortStableFunc(rest, func(a, b scoring.PodScore) int { return cmp.Compare(b.Total, a.Total) })
	out := make([]string, len(rest))
	for i, ps := range rest {
		out[i] = ps.Pod
	}
	return out
}

// DecisionStatus is the HTTP status the proxy answers for a Decide (or
// Flow) error: 400 for a body the engine would refuse or an unknown
// priority class, 413 over MaxBodyBytes, a *ShedError's code when shedding
// (429 for a tenant over its share, 503 when no slot freed in time), 503
// when no pod is eligible.
func DecisionStatus(err error) int {
	var se *ShedError
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, errUnknownClass):
		return http.StatusBadRequest
	case errors.As(err, &se):
		return se.Code
	}
	return http.StatusServiceUnavailable
}

// MaxBodyBytes is the largest request body the server takes, so that other
// fronts bound their buffers alike.
func (s *Server) MaxBodyBytes() int64 { return s.cfg.MaxBodyBytes }

// Ready reports whether discovery has delivered its first view of the
// fleet and the server is not draining: what /readyz answers.
func (s *Server) Ready() bool { return !s.drain.Load() && s.cfg.Fleet.Synced() }

// Endpoint is where pod serves, as host:port (its OpenAI server), and
// whether it is in the fleet.
func (s *Server) Endpoint(pod string) (string, bool) {
	t, ok := s.cfg.Fleet.Target(pod)
	if !ok {
		return "", false
	}
	return hostPort(t.HTTP), true
}

// PodAt names the pod serving at endpoint (host:port), if any.
func (s *Server) PodAt(endpoint string) (string, bool) {
	for _, p := range s.cfg.Fleet.Pods(nil) {
		if e, ok := s.Endpoint(p.Name); ok && e == endpoint {
			return p.Name, true
		}
	}
	return "", false
}

// hostPort is base's host:port ("" when base is not a URL).
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}
