package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/llmd-dev/terraform-provider-llmd/router/picker"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// pickerOptions are the endpoint picker front's flags.
type pickerOptions struct {
	listen, healthListen string
	certFile, keyFile    string
	plaintext, only      bool
	fallbacks            int
}

// pickerFront is the gRPC endpoint picker serving beside the HTTP front.
type pickerFront struct {
	g      *grpc.Server
	ln     net.Listener
	served chan error
	// health and healthLn are the plaintext health listener (nil without
	// --picker-health-listen).
	health   *grpc.Server
	healthLn net.Listener
}

// startPicker serves the endpoint picker on o.listen when it is set (nil
// front otherwise), from the proxy's decision path.
func startPicker(o pickerOptions, srv *proxy.Server, fleet proxy.Fleet, reg prometheus.Registerer, log *slog.Logger) (*pickerFront, error) {
	if o.listen == "" {
		if o.only || o.healthListen != "" {
			return nil, fmt.Errorf("--picker-only and --picker-health-listen need --picker-listen")
		}
		return nil, nil
	}
	m, err := picker.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	p, err := picker.New(picker.Config{Proxy: srv, Fleet: fleet, Metrics: m, Logger: log.With("component", "picker"),
		Fallbacks: o.fallbacks})
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if !o.plaintext {
		if tc, err = picker.TLSConfig(o.certFile, o.keyFile); err != nil {
			return nil, fmt.Errorf("--picker-cert/--picker-key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (--picker-listen): %w", o.listen, err)
	}
	f := &pickerFront{g: p.GRPCServer(tc, srv.Ready), ln: ln, served: make(chan error, 2)}
	if o.healthListen != "" {
		if f.healthLn, err = net.Listen("tcp", o.healthListen); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listening on %s (--picker-health-listen): %w", o.healthListen, err)
		}
		f.health = picker.HealthServer(srv.Ready)
		go func() { f.served <- f.health.Serve(f.healthLn) }()
	}
	go func() { f.served <- f.g.Serve(ln) }()
	return f, nil
}

// done is the channel Serve's end arrives on (nil, never ready, without a
// front).
func (f *pickerFront) done() <-chan error {
	if f == nil {
		return nil
	}
	return f.served
}

// drain stops accepting streams and lets open ones (requests whose
// responses are still streaming through the gateway) finish until ctx ends,
// then cuts them.
func (f *pickerFront) drain(ctx context.Context) error {
	if f == nil {
		return nil
	}
	if f.health != nil {
		// Probes see readiness fail while the streams drain; the kubelet
		// stops probing once the container is terminating.
		defer f.health.Stop()
	}
	stopped := make(chan struct{})
	go func() { f.g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		f.g.Stop()
		return fmt.Errorf("draining the picker's streams: %w", ctx.Err())
	}
}

// pickerOnly narrows the HTTP front to the router's own endpoints, for a
// router that serves clients only through the gateway.
func pickerOnly(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"GET /healthz", "GET /readyz", "GET /metrics"} {
		mux.Handle(p, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this router serves requests only as its gateway's endpoint picker (--picker-only)", http.StatusNotFound)
	})
	return mux
}
