package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// FleetConfig starts many replicas in one process, each with its own HTTP
// listener and KV-event sockets.
type FleetConfig struct {
	// Replica is the template; Pod, Topic and addresses are set per replica.
	Replica  ReplicaConfig
	Replicas int
	// Host is the address every socket binds.
	Host string
	// HTTPPort is replica 0's HTTP port, replica i uses HTTPPort+i; 0 picks
	// free ports.
	HTTPPort int
	// KVPort is replica 0's PUB port; replica i publishes on KVPort+2i and
	// answers replays on KVPort+2i+1; 0 picks free ports.
	KVPort int
	// NoReplay turns the replay sockets off.
	NoReplay bool
}

// ReplicaInfo says where a started replica listens.
type ReplicaInfo struct {
	Pod    string `json:"pod"`
	HTTP   string `json:"http"`
	KV     string `json:"kv"`
	Replay string `json:"replay,omitempty"`
	Topic  string `json:"topic"`
}

// Fleet is a set of running replicas.
type Fleet struct {
	Infos    []ReplicaInfo
	replicas []*Replica
	servers  []*http.Server
	lns      []net.Listener
}

// StartFleet binds every replica's sockets; Serve then runs them.
func StartFleet(cfg FleetConfig) (*Fleet, error) {
	f := &Fleet{}
	for i := range cfg.Replicas {
		if err := f.add(cfg, i); err != nil {
			f.closeAll()
			return nil, err
		}
	}
	return f, nil
}

func port(base, i int) string {
	if base == 0 {
		return "0"
	}
	return strconv.Itoa(base + i)
}

func (f *Fleet) add(cfg FleetConfig, i int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, port(cfg.HTTPPort, i)))
	if err != nil {
		return fmt.Errorf("replica %d: listening: %w", i, err)
	}
	hostPort := ln.Addr().String()
	rc := cfg.Replica
	rc.Pod = "sim-" + strconv.Itoa(i)
	rc.Topic = "kv@" + hostPort + "@" + rc.Model
	rc.Engine.Seed = replicaSeed(cfg.Replica.Engine.Seed, i)
	rc.KVAddr = "tcp://" + net.JoinHostPort(cfg.Host, port(cfg.KVPort, 2*i))
	if !cfg.NoReplay {
		rc.ReplayAddr = "tcp://" + net.JoinHostPort(cfg.Host, port(cfg.KVPort, 2*i+1))
	}
	if cfg.KVPort == 0 {
		rc.KVAddr = "tcp://" + cfg.Host + ":*"
		if !cfg.NoReplay {
			rc.ReplayAddr = rc.KVAddr
		}
	}
	rp, err := NewReplica(rc)
	if err != nil {
		ln.Close()
		return err
	}
	f.lns = append(f.lns, ln)
	f.replicas = append(f.replicas, rp)
	f.servers = append(f.servers, &http.Server{Handler: rp.Handler(), ReadHeaderTimeout: 10 * time.Second})
	f.Infos = append(f.Infos, ReplicaInfo{Pod: rc.Pod, HTTP: "http://" + hostPort, KV: rp.KVAddr(),
		Replay: rp.ReplayAddr(), Topic: rc.Topic})
	return nil
}

// Serve runs every replica until ctx ends, then shuts them down.
func (f *Fleet) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2*len(f.replicas))
	for i, rp := range f.replicas {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[2*i] = rp.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			if err := f.servers[i].Serve(f.lns[i]); !errors.Is(err, http.ErrServerClosed) {
				errs[2*i+1] = fmt.Errorf("serving %s: %w", rp.cfg.Pod, err)
			}
		}()
	}
	<-ctx.Done()
	for _, s := range f.servers {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.Shutdown(sctx)
		cancel()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Start serves the fleet in the background until ctx ends or stop is called;
// stop shuts the replicas down and returns what Serve returned (once; later
// calls return the same).
func (f *Fleet) Start(ctx context.Context) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- f.Serve(ctx) }()
	return sync.OnceValue(func() error {
		cancel()
		return <-served
	})
}

// closeAll releases what a failed start bound.
func (f *Fleet) closeAll() {
	for _, ln := range f.lns {
		ln.Close()
	}
	for _, rp := range f.replicas {
		rp.pub.close()
	}
}
