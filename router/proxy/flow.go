package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// Headers naming a request's flow. A key mapped to a tenant fixes the
// tenant; the class header may only lower a keyed request's class.
const (
	PriorityHeader = "x-llmd-priority"
	TenantHeader   = "x-llmd-tenant"
)

// DefaultClasses are the priority classes when none are configured,
// highest first (config.DefaultPriorityClasses); each takes
// Config.QueueTimeout as its time-to-live.
var DefaultClasses = func() []Class {
	out := make([]Class, len(config.DefaultPriorityClasses))
	for i, name := range config.DefaultPriorityClasses {
		out[i] = Class{Name: name}
	}
	return out
}()

// Default flow settings.
const (
	DefaultClass       = config.DefaultPriorityClass
	DefaultTenantShare = 0.5
)

// APIKey is one accepted bearer key, by the SHA-256 of the key (the key
// itself need not be in the config), and the flow its requests take: its
// Tenant ("" takes the tenant header) and default Class ("" the server's
// default class).
type APIKey struct {
	SHA256 [32]byte
	Tenant string
	Class  string
}

// errUnknownClass is a priority header naming no configured class.
var errUnknownClass = errors.New("unknown priority class")

// keyFor finds the configured key r presents as "Authorization: Bearer
// <key>", comparing digests in constant time so neither length nor
// content leaks; ok is false when it presents none of them.
func (s *Server) keyFor(r *http.Request) (k *APIKey, ok bool) {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(token))
	for i := range s.keys {
		if subtle.ConstantTimeCompare(sum[:], s.keys[i].SHA256[:]) == 1 {
			k = &s.keys[i]
		}
	}
	return k, found && k != nil
}

// Flow is the flow of a request with headers get (an HTTP request's, or the
// gateway's through the endpoint picker) and key (the API key it
// authenticated with, nil for none): the key's tenant, else the tenant
// header; the priority header's class when it is no higher than the key's,
// else the key's class, else the default class. An unknown class is an
// error naming the header and the classes.
func (s *Server) Flow(get func(name string) string, key *APIKey) (Flow, error) {
	f := Flow{Class: s.defaultClass, Tenant: get(TenantHeader)}
	ceiling := 0 // the highest class the request may name
	if key != nil {
		if key.Tenant != "" {
			f.Tenant = key.Tenant
		}
		if key.Class != "" {
			f.Class = s.classIndex(key.Class)
			ceiling = f.Class
		}
	}
	if name := get(PriorityHeader); name != "" {
		c := s.classIndex(name)
		if c < 0 {
			return Flow{}, fmt.Errorf("%w: %s: %q is not one of %s", errUnknownClass, PriorityHeader, name, strings.Join(s.classNames(), ", "))
		}
		f.Class = max(ceiling, c) // a key's class is its ceiling
	}
	return f, nil
}

// classIndex is name's rank among the classes, -1 for none.
func (s *Server) classIndex(name string) int {
	return slices.IndexFunc(s.cfg.Classes, func(c Class) bool { return c.Name == name })
}

func (s *Server) classNames() []string {
	out := make([]string, len(s.cfg.Classes))
	for i, c := range s.cfg.Classes {
		out[i] = c.Name
	}
	return out
}

// setupFlow defaults the classes and resolves the keys and default class
// of cfg.
func (s *Server) setupFlow() error {
	cfg := &s.cfg
	if len(cfg.Classes) == 0 {
		cfg.Classes = DefaultClasses
	}
	cfg.Classes = slices.Clone(cfg.Classes)
	for i, c := range cfg.Classes {
		if c.Name == "" || c.TTL < 0 {
			return fmt.Errorf("proxy: class %d: a name and a TTL >= 0 are required, got %+v", i, c)
		}
		if c.TTL == 0 {
			cfg.Classes[i].TTL = cfg.QueueTimeout
		}
	}
	if cfg.DefaultClass == "" {
		cfg.DefaultClass = DefaultClass
		if s.classIndex(DefaultClass) < 0 {
			cfg.DefaultClass = cfg.Classes[len(cfg.Classes)/2].Name
		}
	}
	if s.defaultClass = s.classIndex(cfg.DefaultClass); s.defaultClass < 0 {
		return fmt.Errorf("proxy: default class %q is not one of %s", cfg.DefaultClass, strings.Join(s.classNames(), ", "))
	}
	if cfg.TenantShare == 0 {
		cfg.TenantShare = DefaultTenantShare
	}
	if cfg.TenantShare < 0 || cfg.TenantShare > 1 {
		return fmt.Errorf("proxy: tenant share %g is not in (0, 1]", cfg.TenantShare)
	}
	if cfg.APIKey != "" {
		s.keys = append(s.keys, APIKey{SHA256: sha256.Sum256([]byte(cfg.APIKey))})
	}
	for _, k := range cfg.APIKeys {
		if k.Class != "" && s.classIndex(k.Class) < 0 {
			return fmt.Errorf("proxy: API key of tenant %q: class %q is not one of %s", k.Tenant, k.Class, strings.Join(s.classNames(), ", "))
		}
		s.keys = append(s.keys, k)
	}
	return nil
}

// RetryAfter is the Retry-After (seconds) of every 429 and 503, from
// either front: shedding is momentary, so well-behaved clients back off
// briefly instead of giving up.
const RetryAfter = "1"
