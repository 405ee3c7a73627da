package addons

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Logf receives progress lines (the provider passes tflog); nil discards them.
type Logf func(format string, args ...any)

func (l Logf) printf(format string, args ...any) {
	if l != nil {
		l(format, args...)
	}
}

// gated passes lines to logf until closed. Helm's actions leave goroutines
// behind when their context ends (an upgrade's wait goes on in the
// background); they must not log through a caller that has returned.
func gated(logf func(format string, args ...any)) (Logf, func()) {
	if logf == nil {
		return nil, func() {}
	}
	var (
		mu     sync.Mutex
		closed bool
	)
	log := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			logf(format, args...)
		}
	}
	return log, func() {
		mu.Lock()
		closed = true
		mu.Unlock()
	}
}

// newHelm is Helm's action configuration for one namespace over cfg, with
// release records in Secrets (Helm's default driver). Every request it makes
// is bound to ctx.
func newHelm(ctx context.Context, cfg *rest.Config, namespace string, logf Logf) (*action.Configuration, error) {
	getter := &restGetter{cfg: boundTo(ctx, cfg), namespace: namespace}
	hc := new(action.Configuration)
	if err := hc.Init(getter, namespace, "secret", func(format string, args ...any) { logf.printf("helm: "+format, args...) }); err != nil {
		return nil, fmt.Errorf("setting up Helm for namespace %s: %w", namespace, err)
	}
	if kc, ok := hc.KubeClient.(*kube.Client); ok {
		// Objects without metadata.namespace go to the release namespace, not
		// to whatever a kubeconfig would say ("default").
		kc.Namespace = namespace
	}
	return hc, nil
}

// restGetter gives Helm the caller's *rest.Config as it is (bearer token,
// CA and the EKS token transport in WrapTransport), never a configuration
// loaded from kubeconfig files, $KUBECONFIG or the in-cluster environment.
type restGetter struct {
	cfg       *rest.Config
	namespace string

	once sync.Once
	disc discovery.CachedDiscoveryInterface
	err  error
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

// ToDiscoveryClient is built once per getter, i.e. per operation: newHelm
// runs after the CRDs are applied, so their kinds are discovered.
func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(g.cfg))
		if err != nil {
			g.err = fmt.Errorf("building the Kubernetes discovery client: %w", err)
			return
		}
		g.disc = memory.NewMemCacheClient(dc)
	})
	return g.disc, g.err
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return fixedClientConfig{g} }

// fixedClientConfig answers the kubeconfig questions Helm's client asks with
// the getter's configuration and namespace; there is no file behind it.
type fixedClientConfig struct{ g *restGetter }

func (f fixedClientConfig) RawConfig() (clientcmdapi.Config, error) {
	return clientcmdapi.Config{}, nil
}
func (f fixedClientConfig) ClientConfig() (*rest.Config, error) { return f.g.ToRESTConfig() }
func (f fixedClientConfig) Namespace() (string, bool, error)    { return f.g.namespace, true, nil }

// ConfigAccess has no paths: nothing can read or write a kubeconfig file.
func (f fixedClientConfig) ConfigAccess() clientcmd.ConfigAccess {
	return &clientcmd.ClientConfigLoadingRules{}
}

// boundTo returns a copy of cfg whose requests end when ctx ends. Helm's
// actions take no context for their requests and waits; bound like this, a
// cancelled apply stops writing at once, as a killed process would, and
// leaves the release pending for the next apply to recover.
func boundTo(ctx context.Context, cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &contextRoundTripper{ctx: ctx, next: rt} })
	return cfg
}

type contextRoundTripper struct {
	ctx  context.Context
	next http.RoundTripper
}

func (c *contextRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := context.Cause(c.ctx); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s not sent: the apply was stopped: %w", req.Method, req.URL.Path, err)
	}
	rctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(c.ctx, func() { cancel(context.Cause(c.ctx)) })
	resp, err := c.next.RoundTrip(req.WithContext(rctx))
	if err != nil {
		stop()
		cancel(nil)
		return nil, err
	}
	// The request's context must live until its body is read (watches, large lists).
	resp.Body = &releaseOnClose{ReadCloser: resp.Body, release: func() { stop(); cancel(nil) }}
	return resp, nil
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (c *contextRoundTripper) WrappedRoundTripper() http.RoundTripper { return c.next }

type releaseOnClose struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
