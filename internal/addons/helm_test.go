package addons

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestBoundRequestsStopWithTheContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(release)

	ctx, cancel := context.WithCancelCause(context.Background())
	rt := &contextRoundTripper{ctx: ctx, next: http.DefaultTransport}
	client := &http.Client{Transport: rt}
	resp, err := client.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "ok" {
		t.Errorf("body %q", body)
	}
	resp.Body.Close()

	// A request in flight when the apply is stopped ends with it.
	stopped := errors.New("terraform was interrupted")
	done := make(chan error, 1)
	go func() {
		resp, err := client.Get(srv.URL + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel(stopped)
	select {
	case err := <-done:
		if !errors.Is(err, stopped) {
			t.Errorf("the in-flight request ended with %v, want the context's cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight request outlived its context")
	}
	// Later requests are not sent at all.
	if _, err := client.Get(srv.URL + "/fast"); err == nil || !strings.Contains(err.Error(), "not sent: the apply was stopped") {
		t.Errorf("a request after the stop: %v", err)
	}
}

func TestRESTGetterKeepsTheCallersConfig(t *testing.T) {
	wrapped := false
	cfg := &rest.Config{Host: "https://example.invalid", BearerToken: "tok",
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { wrapped = true; return rt }}
	g := &restGetter{cfg: boundTo(context.Background(), cfg), namespace: "monitoring"}
	got, err := g.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != cfg.Host || got.BearerToken != "tok" || got.WrapTransport == nil {
		t.Errorf("ToRESTConfig lost the caller's settings: %+v", got)
	}
	got.WrapTransport(http.DefaultTransport)
	if !wrapped {
		t.Error("the caller's WrapTransport (the EKS token transport) is not in the chain")
	}
	if ns, overridden, err := g.ToRawKubeConfigLoader().Namespace(); ns != "monitoring" || !overridden || err != nil {
		t.Errorf("Namespace() = %q %v %v", ns, overridden, err)
	}
	if paths := g.ToRawKubeConfigLoader().ConfigAccess().GetLoadingPrecedence(); len(paths) != 0 {
		t.Errorf("kubeconfig paths %v: Helm must not read kubeconfig files", paths)
	}
}
