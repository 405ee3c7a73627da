package discovery

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// Pod is one ready vLLM pod and where it serves. A Source may fill only
// Name and IP; the Fleet derives the addresses from the configured ports.
type Pod struct {
	Name string
	IP   string
	// HTTP is the base URL of the OpenAI server and /metrics.
	HTTP string
	// KVEvents and Replay are the ZeroMQ publisher and replay addresses;
	// Replay is "" when the fleet runs without replay.
	KVEvents, Replay string
	// Topic is the KV-event subscription prefix.
	Topic string
}

// Source reports the set of ready pods: once when it has a complete view,
// then on every change, until ctx ends. report is never called concurrently.
type Source interface {
	Run(ctx context.Context, report func([]Pod)) error
}

// Addresses derives a pod's addresses from its IP where a Source left them
// empty: vLLM's OpenAI port, its KV-event PUB port and replay port, and the
// topic template, as the provider configures every pod of a fleet alike.
type Addresses struct {
	Discovery config.Discovery
	Model     string
}

// Fill completes p. Addresses are derived only from an IP, and the replay
// address only along with the KV-event address: a pod given its event
// addresses explicitly keeps exactly those (no replay address means the
// publisher has no replay socket).
func (a Addresses) Fill(p Pod) Pod {
	ports := a.Discovery.Ports
	if p.IP == "" {
		return a.fillTopic(p)
	}
	hostPort := func(port int) string { return net.JoinHostPort(p.IP, strconv.Itoa(port)) }
	if p.HTTP == "" {
		p.HTTP = "http://" + hostPort(ports.HTTP)
	}
	if p.KVEvents == "" {
		p.KVEvents = "tcp://" + hostPort(ports.KVEvents)
		if p.Replay == "" && ports.Replay > 0 {
			p.Replay = "tcp://" + hostPort(ports.Replay)
		}
	}
	return a.fillTopic(p)
}

// Endpoints lists p's KV-event publishers: one, or with data parallelism
// one per rank, rank r publishing and replaying on p's ports + r, as vLLM
// offsets them.
func (a Addresses) Endpoints(p Pod) ([]kvevents.Endpoint, error) {
	n := max(a.Discovery.DataParallelSize, 1)
	out := make([]kvevents.Endpoint, 0, n)
	for r := range n {
		addr, err := offsetPort(p.KVEvents, r)
		if err != nil {
			return nil, fmt.Errorf("KV events of %s rank %d: %w", p.Name, r, err)
		}
		replay, err := offsetPort(p.Replay, r)
		if err != nil {
			return nil, fmt.Errorf("KV-event replay of %s rank %d: %w", p.Name, r, err)
		}
		out = append(out, kvevents.Endpoint{Pod: p.Name, Addr: addr, ReplayAddr: replay, Topic: p.Topic})
	}
	return out, nil
}

// offsetPort adds r to the port of a tcp:// address ("" stays "").
func offsetPort(addr string, r int) (string, error) {
	if r == 0 || addr == "" {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || !strings.HasPrefix(addr, "tcp://") || n+r > 65535 {
		return "", fmt.Errorf("cannot offset the port of %q by rank %d: want tcp://host:port", addr, r)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(n+r)), nil
}

// fillTopic derives the KV-event topic from the template.
func (a Addresses) fillTopic(p Pod) Pod {
	ports := a.Discovery.Ports
	if p.Topic == "" && a.Discovery.Topic != "" {
		// The topic names the OpenAI server's address, which a static pod
		// may give as a URL instead of an IP.
		ip, port := p.IP, ports.HTTP
		if u, err := url.Parse(p.HTTP); err == nil && u.Hostname() != "" {
			ip = u.Hostname()
			if n, err := strconv.Atoi(u.Port()); err == nil {
				port = n
			}
		}
		p.Topic = a.Discovery.TopicFor(ip, port, a.Model)
	}
	return p
}

// Static is a fixed list of pods, for local use and the benchmark.
type Static []Pod

// FromConfig turns the config's static list into a Static source.
func FromConfig(list []config.StaticPod) Static {
	out := make(Static, len(list))
	for i, p := range list {
		out[i] = Pod{Name: p.Name, IP: p.IP, HTTP: p.HTTP, KVEvents: p.KVEvents, Replay: p.Replay}
	}
	return out
}

// Run implements Source: it reports the list once and waits for ctx.
func (s Static) Run(ctx context.Context, report func([]Pod)) error {
	report(slices.Clone(s))
	<-ctx.Done()
	return nil
}
