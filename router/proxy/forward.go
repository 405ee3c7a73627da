package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
)

// PodHeader names the pod that answered, on every proxied response.
const PodHeader = "X-Llmd-Pod"

// slot is the pod chosen for one attempt and what frees it afterwards.
type slot struct {
	pod string
	// dpRank is the pod's data-parallel rank to send to, -1 for vLLM's choice.
	dpRank  int
	release func()
}

// DPRankHeader is vLLM's header naming the data-parallel rank that serves a
// request. The router sets it when it chose the rank, and otherwise passes
// on what the client sent.
const DPRankHeader = "X-data-parallel-rank"

// chooser picks the pod for the next attempt, never one in tried.
type chooser func(ctx context.Context, tried []string) (slot, error)

// errNoPods says every pod was tried or none is ready.
var errNoPods = errors.New("no ready pod to route to")

// errUpstreamBroken is a response that broke after its status line reached
// the client: the only honest signal left is to cut the connection.
var errUpstreamBroken = errors.New("upstream response broke mid-body")

// forward sends the request to the pods choose names until one answers
// without a transport error or 5xx, or attempts run out. body is the whole
// request body, resent on each attempt.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, arrived time.Time, body []byte, choose chooser) {
	var tried []string
	var lastErr error
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		sl, err := choose(r.Context(), tried)
		if err != nil {
			s.answerChoice(w, r, err, lastErr)
			return
		}
		err = s.tryPod(w, r, arrived, sl, body, attempt == s.cfg.MaxAttempts)
		if err == nil {
			return
		}
		if errors.Is(err, errUpstreamBroken) {
			s.log.Warn("upstream broke mid-response", "pod", sl.pod, "path", r.URL.Path, "err", err)
			// Closing the connection without the final chunk is how the
			// client learns the body is incomplete.
			panic(http.ErrAbortHandler)
		}
		s.cfg.Metrics.retry()
		s.log.Info("attempt failed, retrying on another pod", "pod", sl.pod, "path", r.URL.Path, "attempt", attempt, "err", err)
		tried = append(tried, sl.pod)
		lastErr = err
	}
	writeError(w, http.StatusBadGateway, fmt.Sprintf("all %d attempts failed, last: %v", s.cfg.MaxAttempts, lastErr))
}

// answerChoice answers a request for which no pod could be chosen.
func (s *Server) answerChoice(w http.ResponseWriter, r *http.Request, err, lastErr error) {
	switch {
	case r.Context().Err() != nil:
		// The client left while queued: nobody to answer.
	case errors.Is(err, errQueueFull), errors.Is(err, errQueueTimeout):
		s.log.Info("shed", "path", r.URL.Path, "reason", err)
		writeError(w, http.StatusTooManyRequests, err.Error())
	case lastErr != nil:
		writeError(w, http.StatusBadGateway, fmt.Sprintf("no pod left to try, last: %v", lastErr))
	default:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// tryPod makes one attempt on sl.pod. It returns nil when the response
// (whatever its status) went to the client or the client left, an error
// worth retrying when nothing was written, and errUpstreamBroken when the
// body broke after the status line went out.
func (s *Server) tryPod(w http.ResponseWriter, r *http.Request, arrived time.Time, sl slot, body []byte, last bool) error {
	defer sl.release()
	target, ok := s.cfg.Fleet.Target(sl.pod)
	if !ok {
		return fmt.Errorf("pod %s left the fleet", sl.pod)
	}
	defer s.cfg.Fleet.Begin(sl.pod)()
	ctx := r.Context()
	up, err := upstreamRequest(ctx, r, target, body)
	if err != nil {
		return err
	}
	if sl.dpRank >= 0 {
		up.Header.Set(DPRankHeader, strconv.Itoa(sl.dpRank))
	}
	start := time.Now()
	before := start.Sub(arrived) // reading, routing, queueing and failed attempts
	resp, err := s.cfg.Transport.RoundTrip(up)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.ej.eject(sl.pod)
		return fmt.Errorf("sending to %s: %w", sl.pod, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 && !last {
		// Read a little so the connection can be reused; the body is
		// the pod's complaint, kept for the log.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s answered %s: %s", sl.pod, resp.Status, bytes.TrimSpace(msg))
	}
	h := w.Header()
	copyHeader(h, resp.Header)
	h.Set(PodHeader, sl.pod)
	w.WriteHeader(resp.StatusCode)
	err = s.copyBody(w, resp.Body, start, before, r.URL.Path)
	took := time.Since(start)
	s.cfg.Metrics.upstreamDone(r.URL.Path, resp.StatusCode, took)
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("served", "path", r.URL.Path, "pod", sl.pod, "status", resp.StatusCode, "upstream", took, "err", err)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %s: %w", errUpstreamBroken, sl.pod, err)
	}
	return nil
}

// upstreamRequest builds the request to target: same method, path, query,
// end-to-end headers and body.
func upstreamRequest(ctx context.Context, r *http.Request, target discovery.Pod, body []byte) (*http.Request, error) {
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimSuffix(target.HTTP, "/")+r.URL.RequestURI(), rd)
	if err != nil {
		return nil, fmt.Errorf("building upstream request to %s: %w", target.Name, err)
	}
	copyHeader(up.Header, r.Header)
	up.ContentLength = int64(len(body))
	return up, nil
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody passes the body through as it arrives, flushing after every
// read so each SSE chunk leaves when the engine sent it. It observes the
// time to the first byte, and the router's own share of the client's wait
// for it: before (the time until the upstream request was sent) plus the
// time to relay the first chunk. A write error means the client left,
// which is not the upstream's fault and returns nil; a read error is
// returned.
func (s *Server) copyBody(w http.ResponseWriter, body io.Reader, start time.Time, before time.Duration, path string) error {
	rc := http.NewResponseController(w)
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	first := true
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			var got time.Time
			if first {
				got = time.Now()
				s.cfg.Metrics.firstByte(path, got.Sub(start))
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			if first {
				s.cfg.Metrics.overhead(path, before+time.Since(got))
				first = false
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// hopHeaders are meaningful only for one connection (RFC 9110 7.6.1) and
// must not be forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// copyHeader adds src's end-to-end headers to dst.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		dst[k] = append(dst[k], vv...)
	}
	for _, f := range src.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			dst.Del(textproto.TrimString(name))
		}
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
}
