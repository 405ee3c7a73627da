package kube

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Logger receives progress lines of long operations (the provider passes tflog).
type Logger func(ctx context.Context, msg string, fields map[string]any)

// Client works on one cluster: typed and dynamic clients over one
// configuration, and a discovery-backed REST mapper for the dynamic side.
type Client struct {
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	// Log, when set, receives progress lines.
	Log Logger
	// Poll is how often waits look again (default 1s).
	Poll time.Duration
	// Progress is how often a wait logs where it stands (default 30s).
	Progress time.Duration
}

// NewClient builds a Client from a configuration (see RESTConfig). It makes
// no request: the first call that needs the API reaches it.
func NewClient(cfg *rest.Config, log Logger) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if log != nil {
		// The API server's warnings (deprecations, policy) reach the user's log, not stderr.
		cfg.WarningHandlerWithContext = warningLogger(log)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes discovery client: %w", err)
	}
	return &Client{Typed: typed, Dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		Log: log, Poll: time.Second, Progress: 30 * time.Second}, nil
}

type warningLogger Logger

func (w warningLogger) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, message string) {
	if code == 299 && message != "" {
		w(ctx, "Kubernetes API warning: "+message, nil)
	}
}

func (c *Client) logf(ctx context.Context, msg string, fields map[string]any) {
	if c.Log != nil {
		c.Log(ctx, msg, fields)
	}
}

// resource finds the dynamic resource client for an object's type.
func (c *Client) resource(r Ref) (dynamic.ResourceInterface, error) {
	m, err := c.mapping(r.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(m.Resource).Namespace(r.Namespace), nil
	}
	return c.Dynamic.Resource(m.Resource), nil
}

func (c *Client) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A CRD installed since the last discovery: look again once.
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("finding the API of %s: %w", gvk, err)
	}
	return m, nil
}

// Serves reports whether the cluster serves a type now, such as a CRD's kind
// (monitoring.coreos.com/v1 PodMonitor). It asks at apply time, never at plan.
func (c *Client) Serves(gvk schema.GroupVersionKind) (bool, error) {
	c.mapper.Reset()
	_, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the cluster whether it serves %s: %w", gvk, err)
	}
	return true, nil
}
