package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// PodHeader names the pod that answered, on every proxied response.
const PodHeader = "X-Llmd-Pod"

// slot is the pod chosen for one attempt and what frees it afterwards.
type slot struct {
	pod string
	// dpRank is the pod's data-parallel rank to send to, -1 for vLLM's choice.
	dpRank int
	// decision is the scored decision of a routed slot (nil for passthrough).
	decision *scoring.Decision
	// started marks the pod's first response byte: the request's prefill
	// is done (its pending tokens leave the pod's count).
	started, release func()
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

// Reasons an attempt or a request is cut by the router's own timeouts.
var (
	errHeaderTimeout  = errors.New("no response headers within the response-header timeout")
	errStalled        = errors.New("no response bytes within the stream idle timeout")
	errRequestTimeout = errors.New("request ran past the request timeout")
)

// forward sends the request to the pods choose names until one answers
// without a transport error, 5xx or 429, or attempts run out. body is the
// whole request body, resent on each attempt; waitHeaders says the pod
// sends its headers before doing the work (a stream, a passthrough), so the
// response-header timeout applies. Attempts after the first wait a
// jittered backoff. A request that ends without an answer gets 503 naming
// why (every attempt's failure, or the pods out of service), never a bare
// 502: the fault is the fleet's state, and a client may retry.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, arrived time.Time, body []byte, waitHeaders bool, choose chooser) {
	ctx := r.Context()
	u := &s.cfg.Upstream
	if u.RequestTimeout.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, u.RequestTimeout.Duration, errRequestTimeout)
		defer cancel()
	}
	var tried []string
	var failed []error
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		if attempt > 1 && !s.backoff(ctx, attempt) {
			s.answerChoice(w, r, context.Cause(ctx), failed)
			return
		}
		sl, err := choose(ctx, tried)
		if err != nil {
			s.answerChoice(w, r, err, failed)
			return
		}
		err = s.tryPod(ctx, w, r, arrived, sl, body, waitHeaders)
		if err == nil {
			return
		}
		if errors.Is(err, errUpstreamBroken) {
			s.log.Warn("upstream broke mid-response", "pod", sl.pod, "path", r.URL.Path, "err", err)
			// Closing the connection without the final chunk is how the
			// client learns the body is incomplete.
			panic(http.ErrAbortHandler)
		}
		if ctx.Err() != nil && r.Context().Err() == nil {
			// The request timeout: every pod would be cut the same way.
			writeError(w, http.StatusGatewayTimeout, fmt.Sprintf("%v after %s, last: %v", errRequestTimeout, u.RequestTimeout, err))
			return
		}
		s.cfg.Metrics.retry()
		s.log.Info("attempt failed, retrying on another pod", "pod", sl.pod, "path", r.URL.Path, "attempt", attempt, "err", err)
		tried = append(tried, sl.pod)
		failed = append(failed, err)
	}
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("all %d attempts failed: %v", s.cfg.MaxAttempts, errors.Join(failed...)))
}

// Backoff between attempts: full jitter (a uniform wait up to
// backoffBase doubled per attempt, at most backoffCap), so requests that
// failed together do not land on the next pod together. The next attempt
// goes to another pod, which is why the waits stay short.
const (
	backoffBase = 20 * time.Millisecond
	backoffCap  = 500 * time.Millisecond
)

// backoff waits before attempt (2 or more); false when ctx ended first.
func (s *Server) backoff(ctx context.Context, attempt int) bool {
	d := rand.N(min(backoffCap, backoffBase<<min(attempt-2, 10)) + 1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// answerChoice answers a request for which no pod could be chosen, after
// the attempts that failed.
func (s *Server) answerChoice(w http.ResponseWriter, r *http.Request, err error, failed []error) {
	switch {
	case r.Context().Err() != nil:
		// The client left while queued: nobody to answer.
	case isShed(err):
		s.log.Info("shed", "path", r.URL.Path, "reason", err)
		writeError(w, DecisionStatus(err), err.Error())
	case errors.Is(err, errRequestTimeout):
		writeError(w, http.StatusGatewayTimeout, err.Error())
	default:
		msg := err.Error()
		if len(failed) > 0 {
			msg = fmt.Sprintf("no healthy pod left to try after %d failed attempts: %v", len(failed), errors.Join(failed...))
		}
		for _, o := range s.cfg.Fleet.Out() {
			msg += "; " + o.String()
		}
		writeError(w, http.StatusServiceUnavailable, msg)
	}
}

// errPodOut cuts an attempt whose pod discovery declared out of service
// before the client saw a byte: the request moves to another pod.
var errPodOut = errors.New("the pod went out of service before answering")

// cutWhenOut cuts the attempt with errPodOut if out closes before stop is
// called; stop reports whether it did. It must be called exactly once.
func cutWhenOut(out <-chan struct{}, cut context.CancelCauseFunc) (stop func() bool) {
	done, fired := make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-out:
			cut(errPodOut)
			fired <- true
		case <-done:
			fired <- false
		}
	}()
	return sync.OnceValue(func() bool { close(done); return <-fired })
}

// tryPod makes one attempt on sl.pod. It returns nil when the response
// (whatever its status under 500, 429 aside) went to the client or the
// client left, an error worth retrying when nothing was written, and
// errUpstreamBroken when the body broke after the status line went out.
// Until the response's first bytes arrive the attempt is cut, and the
// request moves on, when discovery declares the pod out of service (its
// scrapes failing, its counters frozen): a non-streaming answer sends
// nothing until it is whole, so the pod's own progress is its only
// progress signal. Every outcome feeds the pod's circuit breaker; a 429 or
// 503 with Retry-After also keeps the pod out of scoring that long.
func (s *Server) tryPod(ctx context.Context, w http.ResponseWriter, r *http.Request, arrived time.Time, sl slot, body []byte, waitHeaders bool) error {
	defer sl.release()
	target, ok := s.cfg.Fleet.Target(sl.pod)
	if !ok {
		return fmt.Errorf("pod %s left the fleet", sl.pod)
	}
	outcome := attemptNeutral
	defer func(done func(attempt)) { done(outcome) }(s.br.begin(sl.pod))

	// The attempt's own context carries the header and idle timeouts, so
	// cutting a pod that stalls leaves the request free to go elsewhere.
	actx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	watching := cutWhenOut(s.cfg.Fleet.OutSignal(sl.pod), cut)
	defer watching()
	up, err := upstreamRequest(actx, r, target, body)
	if err != nil {
		return err
	}
	if sl.dpRank >= 0 {
		up.Header.Set(DPRankHeader, strconv.Itoa(sl.dpRank))
	}
	var headerTimer *time.Timer
	if d := s.cfg.Upstream.ResponseHeaderTimeout.Duration; waitHeaders && d > 0 {
		headerTimer = time.AfterFunc(d, func() { cut(errHeaderTimeout) })
	}
	start := time.Now()
	before := start.Sub(arrived) // reading, routing, queueing and failed attempts
	resp, err := s.cfg.Transport.RoundTrip(up)
	if headerTimer != nil {
		headerTimer.Stop()
	}
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left
		}
		if cause := context.Cause(actx); cause != nil {
			err = cause
		}
		if ctx.Err() == nil {
			outcome = attemptFailed
			if isRefused(err) {
				outcome = attemptRefused
			}
		}
		return fmt.Errorf("sending to %s: %w", sl.pod, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		if resp.StatusCode != http.StatusTooManyRequests {
			outcome = attemptFailed // overload is not sickness: a 429 counts for nothing
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
				s.br.hold(sl.pod, d)
			}
		}
		// Read a little so the connection can be reused; the body is the
		// pod's complaint, kept for the log and the final answer.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s answered %s: %s", sl.pod, resp.Status, bytes.TrimSpace(msg))
	}
	rd := &idleReader{r: resp.Body, d: s.cfg.Upstream.StreamIdleTimeout.Duration, cut: cut}
	defer rd.stop()
	// Wait for the first body bytes before answering: until then the
	// client has seen nothing, and a pod that stalls is still a retry.
	first, rerr := rd.first(&bufs)
	defer first.free()
	sl.started()
	if watching() && r.Context().Err() == nil {
		// The pod went out while its first bytes arrived: the client has
		// seen nothing, and what follows would be cut.
		rerr = errPodOut
	}
	if rerr != nil && rerr != io.EOF {
		if r.Context().Err() != nil {
			return nil
		}
		if ctx.Err() == nil {
			outcome = attemptFailed
		}
		return fmt.Errorf("reading the response of %s: %w", sl.pod, causeOf(actx, rerr))
	}
	h := w.Header()
	copyHeader(h, resp.Header)
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	h.Set(PodHeader, sl.pod)
	w.WriteHeader(resp.StatusCode)
	err = s.copyBody(w, rd, first, rerr, start, before, r.URL.Path)
	took := time.Since(start)
	s.cfg.Metrics.upstreamDone(r.URL.Path, resp.StatusCode, took)
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("served", "path", r.URL.Path, "pod", sl.pod, "status", resp.StatusCode, "upstream", took, "err", err)
	}
	switch {
	case err != nil && r.Context().Err() == nil:
		if ctx.Err() == nil {
			outcome = attemptFailed
		}
		return fmt.Errorf("%w: %s: %w", errUpstreamBroken, sl.pod, causeOf(actx, err))
	case err == nil:
		for k, vv := range resp.Trailer {
			h[k] = vv
		}
		outcome = attemptOK
	}
	return nil
}

// retryAfter reads a Retry-After value (RFC 9110 10.2.3: delay seconds or
// an HTTP date) as a duration from now; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// causeOf names the router's timeout when it is why err happened.
func causeOf(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// isRefused reports a connection nobody accepted.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
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
	setForwarded(up.Header, r)
	up.ContentLength = int64(len(body))
	return up, nil
}

// setForwarded appends the client's address to X-Forwarded-For and sets
// X-Forwarded-Proto and -Host, as proxies do, so the engine's access log
// and any policy behind the router see the client rather than the router.
func setForwarded(h http.Header, r *http.Request) {
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
	h.Set("X-Forwarded-Host", r.Host)
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// idleReader reads a response body, cutting the attempt (through cut)
// when no byte arrives for d: a pod that stalls mid-stream would otherwise
// hold the client, the slot and the connection until the request timeout.
type idleReader struct {
	r     io.Reader
	d     time.Duration
	cut   context.CancelCauseFunc
	timer *time.Timer
}

func (ir *idleReader) Read(p []byte) (int, error) {
	if ir.d > 0 {
		if ir.timer == nil {
			ir.timer = time.AfterFunc(ir.d, func() { ir.cut(errStalled) })
		} else {
			ir.timer.Reset(ir.d)
		}
	}
	n, err := ir.r.Read(p)
	if ir.timer != nil {
		ir.timer.Stop()
	}
	return n, err
}

func (ir *idleReader) stop() {
	if ir.timer != nil {
		ir.timer.Stop()
	}
}

// chunk is a pooled buffer holding the first bytes of a body.
type chunk struct {
	bp *[]byte
	n  int
}

func (c chunk) bytes() []byte { return (*c.bp)[:c.n] }
func (c chunk) free()         { bufs.Put(c.bp) }

// first reads until the body yields its first bytes or ends.
func (ir *idleReader) first(pool *sync.Pool) (chunk, error) {
	c := chunk{bp: pool.Get().(*[]byte)}
	for {
		n, err := ir.Read(*c.bp)
		c.n = n
		if n > 0 || err != nil {
			return c, err
		}
	}
}

// copyBody passes the body through as it arrives, flushing after every
// read so each SSE chunk leaves when the engine sent it; first is what was
// read before the headers went out, with the error that read ended on. It
// observes the time to the first byte, and the router's own share of the
// client's wait for it: before (the time until the upstream request was
// sent) plus the time to relay the first chunk. A write error means the
// client left, which is not the upstream's fault and returns nil; a read
// error is returned.
func (s *Server) copyBody(w http.ResponseWriter, body io.Reader, first chunk, ferr error, start time.Time, before time.Duration, path string) error {
	rc := http.NewResponseController(w)
	if first.n > 0 {
		got := time.Now()
		s.cfg.Metrics.firstByte(path, got.Sub(start))
		if _, err := w.Write(first.bytes()); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		s.cfg.Metrics.overhead(path, before+time.Since(got))
	}
	if ferr == io.EOF {
		return nil
	}
	buf := *first.bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
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
