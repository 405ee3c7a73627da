package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// startPickerServe runs `llmd-router serve` with the picker front on a free
// port (extra args appended) and waits until it is ready with the pods.
func startPickerServe(t testing.TB, pods int, args ...string) (*router, string) {
	t.Helper()
	var ann []struct{ Listen, Picker string }
	p := start(t, "", 1, &ann, append([]string{"serve", "--listen", "127.0.0.1:0", "--picker-listen", "127.0.0.1:0"}, args...)...)
	r := &router{proc: p, url: "http://" + ann[0].Listen}
	waitFor(t, "the router ready", func() bool {
		resp, err := http.Get(r.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && r.gauge(t, "llmd_router_pods") == float64(pods)
	})
	return r, ann[0].Picker
}

// TestServePickerDrainsStreamsOnSIGTERM: a request picked before SIGTERM
// finishes its response through the picker (as HTTP streams finish), new
// streams are refused, and the router then exits cleanly. The listener
// serves TLS with a self-signed certificate by default.
func TestServePickerDrainsStreamsOnSIGTERM(t *testing.T) {
	infos, _ := startReplicas(t, 1)
	r, addr := startPickerServe(t, 1, "--pods-file", podsFile(t, infos))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // a picker's self-signed certificate, as gateways accept it
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := extprocv3.NewExternalProcessorClient(conn).Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *extprocv3.ProcessingRequest) {
		t.Helper()
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *extprocv3.ProcessingResponse {
		t.Helper()
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/completions")}}}}}})
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: completion(t, tokens(32, 1), 2, false), EndOfStream: true}}})
	if recv().GetRequestHeaders() == nil {
		t.Fatal("no destination")
	}
	if recv().GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream() != true {
		t.Fatal("body not re-sent in one chunk")
	}

	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case <-r.done:
		t.Fatal("the router exited with a stream open")
	default:
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{}}})
	recv()
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte(`{"choices":[]}`), EndOfStream: true}}})
	if got := string(recv().GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()); got != `{"choices":[]}` {
		t.Fatalf("response body passed back as %q", got)
	}
	_ = st.CloseSend()
	_, _ = st.Recv()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("router exit: %v\n%s", r.err, r.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the router did not exit after its last stream ended")
	}
}

// TestServePickerHealthAndPlaintext: --picker-plaintext serves without TLS
// and the gRPC health services answer as the protocol names them.
func TestServePickerHealthAndPlaintext(t *testing.T) {
	infos, _ := startReplicas(t, 1)
	_, addr := startPickerServe(t, 1, "--pods-file", podsFile(t, infos), "--picker-plaintext")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s: %v %v", svc, resp, err)
		}
	}
}

// TestServePickerHealthListener: with --picker-health-listen the health
// services answer in plaintext on their own address (as Kubernetes' gRPC
// probes ask, without TLS) while the picker itself keeps TLS and refuses a
// plaintext client; a service the protocol does not name is NotFound.
func TestServePickerHealthListener(t *testing.T) {
	infos, _ := startReplicas(t, 1)
	var ann []struct {
		Listen, Picker string
		Health         string `json:"picker_health"`
	}
	start(t, "", 1, &ann, "serve", "--listen", "127.0.0.1:0", "--picker-listen", "127.0.0.1:0",
		"--picker-health-listen", "127.0.0.1:0", "--pods-file", podsFile(t, infos))
	if ann[0].Health == "" || ann[0].Health == ann[0].Picker {
		t.Fatalf("health listener announced as %q beside the picker's %q", ann[0].Health, ann[0].Picker)
	}
	check := func(addr, svc string) (*healthpb.HealthCheckResponse, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	}
	waitFor(t, "readiness SERVING over plaintext", func() bool {
		resp, err := check(ann[0].Health, "readiness")
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	for _, svc := range []string{"liveness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		if resp, err := check(ann[0].Health, svc); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s on the health listener: %v %v", svc, resp, err)
		}
	}
	if _, err := check(ann[0].Health, "nonsense"); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown service answered %v, want NotFound", err)
	}
	if _, err := check(ann[0].Picker, "liveness"); err == nil {
		t.Fatal("the TLS picker listener answered a plaintext client")
	}
}
