package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// passthroughPaths are the engine endpoints the router forwards as they
// are, to any ready pod: the same on every pod and cheap. Any other path
// is 404, so the router exposes no engine endpoint it was not meant to
// (vLLM's /reset_prefix_cache, /sleep, /collective_rpc and the like, or
// /v1/embeddings on a generation fleet).
var passthroughPaths = map[string]string{
	"/v1/models":  http.MethodGet,
	"/health":     http.MethodGet,
	"/version":    http.MethodGet,
	"/tokenize":   http.MethodPost,
	"/detokenize": http.MethodPost,
}

// keyCheck compares presented bearer tokens with the admin token in
// constant time (over digests, so neither length leaks).
type keyCheck struct{ sum [32]byte }

func newKeyCheck(key string) *keyCheck {
	if key == "" {
		return nil
	}
	return &keyCheck{sum: sha256.Sum256([]byte(key))}
}

// ok reports whether r carries "Authorization: Bearer <key>".
func (k *keyCheck) ok(r *http.Request) bool {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(token))
	return found && subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1
}

// guard wraps h with the router's authentication:
//   - /v1/route (and any admin endpoint) needs the admin token when one is
//     set, else the API key;
//   - with API keys, every other /v1 path needs one of them except for OPTIONS, as
//     vLLM's own --api-key middleware checks; the header still reaches the
//     pods, which check it again.
//
// /healthz, /readyz and /metrics stay open for probes and scrapers.
func (s *Server) guard(admin bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ok bool
		switch {
		case r.Method == http.MethodOptions || !admin && !strings.HasPrefix(r.URL.Path, "/v1"):
			ok = true
		case admin && s.adminToken != nil:
			ok = s.adminToken.ok(r)
		case len(s.keys) == 0:
			ok = true
		default:
			_, ok = s.keyFor(r)
		}
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"Unauthorized"}`))
			return
		}
		h(w, r)
	}
}
