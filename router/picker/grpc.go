package picker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/llmd-dev/terraform-provider-llmd/router/servingcert"
)

// Health service names of the Endpoint Picker Protocol.
const (
	HealthLiveness  = "liveness"
	HealthReadiness = "readiness"
	// HealthExtProc is the ext_proc service's own name, which Envoy's gRPC
	// health check asks for.
	HealthExtProc = "envoy.service.ext_proc.v3.ExternalProcessor"
)

// GRPCServer returns a gRPC server serving s and the health services over
// tlsConf (nil: plaintext). ready says whether the router may take
// requests (discovery synced, not draining): readiness and the ext_proc
// service answer SERVING only then; liveness always does.
func (s *Server) GRPCServer(tlsConf *tls.Config, ready func() bool) *grpc.Server {
	var opts []grpc.ServerOption
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	g := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, &health{ready: ready})
	return g
}

// HealthServer returns a plaintext gRPC server with the health services
// alone, for Kubernetes' gRPC probes: the kubelet's probe speaks no TLS, so
// it cannot check the TLS listener, and this one carries nothing a client
// could abuse (llm-d's picker keeps a health port of its own likewise).
func HealthServer(ready func() bool) *grpc.Server {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, &health{ready: ready})
	return g
}

// health answers the gRPC health checking protocol from the router's state
// at the time of each check.
type health struct {
	healthpb.UnimplementedHealthServer
	ready func() bool
}

func (h *health) status(service string) (healthpb.HealthCheckResponse_ServingStatus, bool) {
	switch service {
	case "", HealthLiveness:
		return healthpb.HealthCheckResponse_SERVING, true
	case HealthReadiness, HealthExtProc:
		if h.ready() {
			return healthpb.HealthCheckResponse_SERVING, true
		}
		return healthpb.HealthCheckResponse_NOT_SERVING, true
	}
	return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, false
}

// Check implements healthpb.HealthServer.
func (h *health) Check(_ context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, ok := h.status(r.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", r.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List implements healthpb.HealthServer.
func (h *health) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for _, svc := range []string{HealthLiveness, HealthReadiness, HealthExtProc} {
		st, _ := h.status(svc)
		out.Statuses[svc] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// TLSConfig is the listener's TLS: certFile and keyFile when given, else a
// self-signed certificate made now (as llm-d's picker serves by default;
// gateways pointed at a picker skip verification or pin it).
func TLSConfig(certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("the picker's TLS needs both a certificate and a key file, or neither for a self-signed one")
	}
	var cert tls.Certificate
	var err error
	if certFile != "" {
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the picker's TLS certificate %s: %w", certFile, err)
		}
	} else if cert, err = servingcert.SelfSigned("llmd-router endpoint picker"); err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}, nil
}
