package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// routerProc is a running `llmd-router serve` process in front of the fleet.
type routerProc struct {
	cmd  *exec.Cmd
	addr string
	logs *tailBuffer
	done chan error
}

// livePeers are the peer addresses of policy's router replicas, each a
// free loopback port below the ephemeral range (a port a listen on port 0
// picks could be taken by any connection before the replica binds it):
// none for one router or "policy@N-alone".
func livePeers(policy string) ([]string, error) {
	if Routers(policy) < 2 || alone(policy) {
		return nil, nil
	}
	ports, err := freeport.Ports(Routers(policy))
	if err != nil {
		return nil, fmt.Errorf("ports for the router replicas' peers: %w", err)
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// peerConfig is replica i's peer exchange over addrs (off without them):
// each lists every replica, its own included, as the provider's static
// form would.
func peerConfig(addrs []string, i int) config.Peers {
	if len(addrs) == 0 {
		return config.Peers{}
	}
	return config.Peers{Listen: addrs[i], Static: addrs}
}

// startRouter runs `<bin> serve` with a config naming the fleet's replicas
// as static pods and the policy's scorers, and waits for the address it
// prints.
func startRouter(ctx context.Context, opts LiveOptions, dir, policy string, scorers []config.Scorer, blockSize int,
	fleet []sim.ReplicaInfo, peers config.Peers) (*routerProc, error) {
	bin := opts.Router
	cfgPath := filepath.Join(dir, policy+"-router.json")
	if peers.Listen != "" {
		cfgPath = filepath.Join(dir, policy+"-router-"+strings.ReplaceAll(peers.Listen, ":", "_")+".json")
	}
	static := make([]config.StaticPod, len(fleet))
	for i, info := range fleet {
		static[i] = config.StaticPod{Name: info.Pod, HTTP: info.HTTP, KVEvents: info.KV, Replay: info.Replay}
	}
	// The block size is given, as the provider gives it (DESIGN.md decision
	// 2): learned from the first BlockStored, the router would make the
	// opening burst of decisions without block keys, so without prefix
	// scores or speculative entries.
	cfg, err := json.Marshal(config.Config{Model: opts.Model, Tokenizer: opts.Tokenizer, BlockSize: blockSize, Discovery: config.Discovery{Static: static},
		Scoring: config.Scoring{Scorers: scorers}, Peers: peers})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("writing the router config: %w", err)
	}
	p := &routerProc{logs: &tailBuffer{max: 8 << 10}, done: make(chan error, 1)}
	args := append([]string{"serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--log-level", "warn"}, opts.RouterArgs...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.logs
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", bin, err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l struct {
				Listen string `json:"listen"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Listen != "" {
				addr <- l.Listen
				break
			}
		}
		for sc.Scan() { // keep draining so the router never blocks on stdout
		}
	}()
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case a := <-addr:
		p.addr = "http://" + a
		return p, nil
	case err := <-p.done:
		return nil, fmt.Errorf("%s serve exited before listening (%v): %s", bin, err, p.logs.String())
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s serve printed no address in 60 s: %s", bin, p.logs.String())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// stop ends the router: SIGTERM, then SIGKILL after 10 s.
func (p *routerProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// alive reports an early exit of the router as an error.
func (p *routerProc) alive() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("router exited during the run (%v): %s", err, p.logs.String())
	default:
		return nil
	}
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// errRouterMissing says the serve command is absent from the binary.
var errRouterMissing = errors.New("live mode routes through `llmd-router serve`, which this binary does not implement yet")
