package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// routed serves the two inference endpoints: read, tokenize, pick, forward.
func (s *Server) routed(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := readBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyTimeout)
	if err != nil {
		s.cfg.Metrics.decision(outcomeInvalid)
		bodyError(w, err)
		return
	}
	key, _ := s.keyFor(r)
	flow, err := s.Flow(r.Header.Get, key)
	if err != nil {
		s.cfg.Metrics.decision(outcomeInvalid)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req, ok := s.prompt(w, r.URL.Path, body)
	if !ok {
		return
	}
	if body, err = s.EngineBody(body, flow); err != nil {
		s.cfg.Metrics.decision(outcomeInvalid)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.forward(w, r, arrived, body, req.Stream, s.routeChooser(req, flow))
}

// prompt turns body into a routing request, answering 400 for a body the
// engine would refuse. An untokenizable request routes on load alone.
func (s *Server) prompt(w http.ResponseWriter, path string, body []byte) (*scoring.Request, bool) {
	req, err := s.parse(path, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return req, true
}

// parse is prompt without the answer, shared with Decide: an error means
// the engine would refuse the body.
func (s *Server) parse(path string, body []byte) (*scoring.Request, error) {
	req, err := s.cfg.Prompter.Prompt(path, body)
	switch {
	case err == nil:
	case errors.Is(err, scoring.ErrUntokenizable) && req != nil:
		s.cfg.Metrics.untokenizable(req.Untokenizable)
	default:
		s.cfg.Metrics.decision(outcomeInvalid)
		return nil, err
	}
	return req, nil
}

// routeChooser picks with the scorers among the untried pods with room
// (admission), queueing in flow's class and tenant when the pod the
// scorers choose over every pod has none. The slot is taken before the
// picker commits its decision, so the index's speculative "this pod holds
// the prefix" is only ever recorded for the pod the request goes to.
func (s *Server) routeChooser(req *scoring.Request, flow Flow) chooser {
	var since time.Time // the first wait: the class's TTL runs from it
	var buf, open []scoring.Pod
	var pf *prefillDemand // the request's prefill per pod, when its class is held to it
	kv := s.kvDemand(req)
	return func(ctx context.Context, tried []string) (slot, error) {
		held := "" // a pod whose room was handed over while queued
		drop := func() {
			if held != "" {
				s.adm.unhand(held, kv)
				held = ""
			}
		}
		var started, admStarted, end func()
		// place is one pass over the pods under s.deciding, from reading
		// their loads to counting the request on the chosen one, so each
		// decision sees every request placed before it, as one router
		// deciding a burst in turn would. It finds no untried pod (noPods),
		// no pod with room (wait, for want when the scorers prefer a full
		// pod), or the picker's answer.
		place := func() (d scoring.Decision, want string, noPods, wait bool, err error) {
			s.deciding.Lock()
			defer s.deciding.Unlock()
			buf = s.br.filter(untried(s.cfg.Fleet.Pods(buf[:0]), tried))
			if len(buf) == 0 {
				return d, "", true, false, nil
			}
			pf = nil
			if s.adm.leads(flow.Class) {
				pf = newPrefillDemand(s.cfg.Picker, req, buf)
			}
			open = s.adm.withRoom(append(open[:0], buf...), flow.Class, kv, pf)
			if held != "" { // its room is on its way to us: withRoom left it out
				if i := slices.IndexFunc(buf, func(p scoring.Pod) bool { return p.Name == held }); i >= 0 {
					open = append(open, buf[i])
				} else {
					drop() // the pod left or its breaker opened while we queued
				}
			}
			if held == "" && len(open) < len(buf) && !pf.cold() {
				// Some pod is full: wait for the one the scorers choose
				// over them all when it is one of those (a prompt no pod
				// holds any of, counted per pod, waits for any).
				if e, err := s.cfg.Picker.Explain(req, buf); err == nil &&
					!slices.ContainsFunc(open, func(p scoring.Pod) bool { return p.Name == e.Pod }) {
					want, open = e.Pod, open[:0]
				}
			}
			if len(open) == 0 {
				return d, want, false, true, nil
			}
			// The request counts as in flight on its pod from the moment
			// the pod admits it, inside the decision: a burst's next
			// decisions see it, not a count from before it was sent.
			d, err = s.cfg.Picker.PickAdmitted(req, open, func(pod string, uncached int) bool {
				handed := pod == held
				if handed {
					held = ""
				} else if !s.adm.acquire(pod, flow.Class, kv, uncached) {
					return false
				}
				admStarted = s.adm.begin(pod, handed, flow.Class, uncached)
				started, end = s.cfg.Fleet.Begin(pod, uncached, s.adm.leads(flow.Class))
				s.work.add(time.Now(), placedWork(req, uncached))
				return true
			})
			return d, "", false, false, err
		}
		for {
			d, want, noPods, wait, err := place()
			if noPods {
				drop()
				if s.cfg.Waker != nil && len(tried) == 0 {
					if since.IsZero() {
						since = time.Now()
					}
					if err := s.awaitPod(ctx, flow, since); err != nil {
						return slot{}, err
					}
					continue
				}
				s.cfg.Metrics.decision(outcomeNoPods)
				return slot{}, errNoPods
			}
			if wait {
				queued := time.Now()
				if since.IsZero() {
					since = queued
				}
				pod, err := s.adm.wait(ctx, flow, kv, pf, want, tried, since)
				s.cfg.Metrics.queueWait(s.cfg.Classes[flow.Class].Name, err, time.Since(queued))
				if err != nil {
					if ctx.Err() == nil {
						s.cfg.Metrics.decision(outcomeShed)
					}
					return slot{}, err
				}
				held = pod
				continue
			}
			if errors.Is(err, scoring.ErrNotAdmitted) {
				continue // another request took the pod's last room since withRoom
			}
			drop() // the picker preferred another pod to the one handed over
			if err != nil {
				return slot{}, err
			}
			if len(tried) == 0 {
				s.cfg.Metrics.decided(&d)
			}
			// Any completion stores blocks once prompt and output fill one;
			// d.Blocks cannot tell, being 0 until events taught the block size.
			s.cfg.Fleet.ExpectEvents(d.Pod)
			// The decision's speculative entries stay while the request
			// waits at the pod, and start their TTL at its first byte.
			return slot{pod: d.Pod, dpRank: d.DPRank, decision: &d,
				started: func() { started(); admStarted(); d.Hold.Settle() },
				release: func() { d.Hold.Settle(); end(); admStarted(); s.adm.release(d.Pod, kv) }}, nil
		}
	}
}

// kvDemand is what req holds of a pod's KV cache at its longest, for the
// KV bound; nil when the bound is off or cannot count the request.
func (s *Server) kvDemand(req *scoring.Request) *kvDemand {
	if s.cfg.KVOutputReserve == 0 {
		return nil
	}
	return newKVDemand(req, s.cfg.Picker.BlockSize(), s.cfg.KVOutputReserve)
}

// untried removes the pods in tried from pods, in place.
func untried(pods []scoring.Pod, tried []string) []scoring.Pod {
	if len(tried) == 0 {
		return pods
	}
	return slices.DeleteFunc(pods, func(p scoring.Pod) bool { return slices.Contains(tried, p.Name) })
}

// passthrough forwards the allowed engine endpoints (passthroughPaths) to
// the ready pod with the fewest requests in flight from this router: model
// lists, /tokenize and the like are the same on every pod and cost little,
// so they skip scoring and caps.
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := readBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyTimeout)
	if err != nil {
		bodyError(w, err)
		return
	}
	var buf []scoring.Pod
	var since time.Time
	flow := Flow{Class: s.defaultClass}
	s.forward(w, r, arrived, body, true, func(ctx context.Context, tried []string) (slot, error) {
		for buf = s.br.filter(untried(s.cfg.Fleet.Pods(buf[:0]), tried)); len(buf) == 0; buf = s.br.filter(s.cfg.Fleet.Pods(buf[:0])) {
			if s.cfg.Waker == nil || len(tried) > 0 {
				return slot{}, errNoPods
			}
			if since.IsZero() {
				since = time.Now()
			}
			if err := s.awaitPod(ctx, flow, since); err != nil {
				return slot{}, err
			}
		}
		best := buf[0]
		for _, p := range buf[1:] {
			if p.Load.InFlight < best.Load.InFlight {
				best = p
			}
		}
		started, end := s.cfg.Fleet.Begin(best.Name, 0, false)
		return slot{pod: best.Name, dpRank: -1, started: started, release: end}, nil
	})
}

// explain answers POST /v1/route: the decision the router would take for
// the body now, with every pod's scores, committing nothing. The body is a
// chat request when it has "messages" (or ?path= says so), else a
// completion.
func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyTimeout)
	if err != nil {
		bodyError(w, err)
		return
	}
	path := r.URL.Query().Get("path")
	if path == "" {
		var probe struct {
			Messages json.RawMessage `json:"messages"`
		}
		path = chat.PathCompletions
		if json.Unmarshal(body, &probe) == nil && probe.Messages != nil {
			path = chat.PathChatCompletions
		}
	}
	if path != chat.PathCompletions && path != chat.PathChatCompletions {
		writeError(w, http.StatusBadRequest, "path must be "+chat.PathCompletions+" or "+chat.PathChatCompletions)
		return
	}
	req, err := s.cfg.Prompter.Prompt(path, body)
	if err != nil && !(errors.Is(err, scoring.ErrUntokenizable) && req != nil) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	d, err := s.cfg.Picker.Explain(req, s.cfg.Fleet.Pods(nil))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Path string `json:"path"`
		scoring.Decision
	}{path, d})
}
