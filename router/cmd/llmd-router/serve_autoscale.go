package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/llmd-dev/terraform-provider-llmd/router/autoscale"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/servingcert"
)

// How often the router reads the API server's front-proxy settings again,
// and how long it keeps an authorization answer.
const (
	frontProxyRefresh = time.Minute
	reviewTTL         = 10 * time.Second
)

// autoscaler is the router's running part in its fleet's autoscaling.
type autoscaler struct {
	scaler *autoscale.Scaler // nil without autoscaling.deployment
	api    *http.Server      // nil without autoscaling.metrics_listen
	ln     net.Listener
}

// newAutoscaler makes the Scaler when autoscaling.deployment is set, so the
// proxy can wake the fleet; demand reads the proxy's once it exists.
func newAutoscaler(cfg *config.Config, kubeconfig string, demand func() int64, log *slog.Logger) (*autoscaler, error) {
	a := &autoscaler{}
	as := cfg.Autoscaling
	if as == nil || as.Deployment == "" {
		return a, nil
	}
	_, cs, err := kubeClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	a.scaler = autoscale.NewScaler(autoscale.ScalerConfig{Client: cs, Namespace: cfg.Discovery.Kubernetes.Namespace,
		Deployment: as.Deployment, IdleAfter: as.ScaleToZeroAfter.Duration, Demand: demand,
		Log: log.With("component", "autoscale")})
	return a, nil
}

// waker is the proxy's Waker: nil when the router never scales the fleet.
func (a *autoscaler) waker() proxy.Waker {
	if a.scaler == nil {
		return nil
	}
	return a.scaler
}

// start runs the Scaler and serves the External metrics API, until ctx
// ends (the API) or stop.
func (a *autoscaler) start(ctx context.Context, cfg *config.Config, kubeconfig string, demand, work func() int64, log *slog.Logger) error {
	if a.scaler != nil {
		go a.scaler.Run(ctx)
	}
	as := cfg.Autoscaling
	if as == nil || as.MetricsListen == "" {
		return nil
	}
	k := cfg.Discovery.Kubernetes
	fleetLabels, err := labels.ConvertSelectorToLabelsMap(k.Selector)
	if err != nil {
		return fmt.Errorf("autoscaling: discovery.kubernetes.selector %q is not a set of labels (key=value,...): %w", k.Selector, err)
	}
	_, cs, err := kubeClient(kubeconfig)
	if err != nil {
		return err
	}
	alog := log.With("component", "metrics-api")
	fp, err := autoscale.WatchFrontProxy(ctx, cs, frontProxyRefresh, func(err error) { alog.Warn(err.Error()) })
	if err != nil {
		return fmt.Errorf("autoscaling.metrics_listen: %w", err)
	}
	cert, err := servingcert.SelfSigned("llmd-router metrics API")
	if err != nil {
		return err
	}
	api := autoscale.NewMetricsAPI(autoscale.MetricsAPIConfig{Namespace: k.Namespace, Labels: fleetLabels, Demand: demand, Work: work,
		Auth: fp, Allowed: autoscale.NewReviewer(cs, reviewTTL).Allowed, Log: alog})
	ln, err := net.Listen("tcp", as.MetricsListen)
	if err != nil {
		return fmt.Errorf("autoscaling.metrics_listen %s: %w", as.MetricsListen, err)
	}
	// The client certificate is asked for, not required by the handshake:
	// the API checks it against the front proxy's CA, which it reads from
	// the API server and may change.
	a.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12})
	a.api = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(alog.Handler(), slog.LevelWarn)}
	go func() {
		if err := a.api.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			alog.Error("serving the metrics API", "error", err)
		}
	}()
	return nil
}

// stop closes the metrics API.
func (a *autoscaler) stop() {
	if a.api != nil {
		_ = a.api.Close()
	}
}
