package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EngineOptions start one real vLLM engine.
type EngineOptions struct {
	// Args are `vllm serve`'s arguments as the fleet renders them
	// (workloads.Fleet.Args): the model path first, which becomes the tiny
	// model's directory, and $(POD_IP), which becomes the engine's address.
	Args []string
	// Env is added to what every engine gets (USER, HF_HUB_OFFLINE, the
	// CPU platform's settings).
	Env map[string]string
	// KVCacheGiB is the CPU backend's KV cache (VLLM_CPU_KVCACHE_SPACE, whole
	// GiB; 0: 1). --num-gpu-blocks-override in Args bounds it in blocks.
	KVCacheGiB int
	// S3, when set, is the object store the engine reaches as a pod reaches
	// S3 (engineS3Env); a model path of s3://... in Args is then kept as
	// written and streamed from it (--load-format runai_streamer).
	S3 *Moto
}

// Engine is a real vLLM engine serving the tiny model in a network
// namespace of its own, as a pod: its own address, vLLM's own ports, the
// fleet's flags unchanged (it binds 0.0.0.0:8000 and tcp://*:5557 as in the
// cluster, which two engines on one network could not).
type Engine struct {
	// Name is the engine's pod-like name, IP its address in its namespace.
	Name, IP string
	// URL is the engine's OpenAI server ("http://IP:8000" for the fleet's port).
	URL string

	inst VLLMInstall
	slot int
	args []string
	env  []string

	mu   sync.Mutex
	proc *process
}

// engineBoot is how long a cold engine may take to serve /health: imports
// and the model's load take ~40 s on an idle core and twice that beside a
// build.
const engineBoot = 5 * time.Minute

// StartEngine starts one engine with opts and waits until it serves; Main
// stops it. Each engine takes one core (VLLM_CPU_OMP_THREADS_BIND) and about
// 2.2 GB plus its KV cache.
func StartEngine(t testing.TB, opts EngineOptions) *Engine {
	t.Helper()
	return StartEngines(t, 1, opts)[0]
}

// StartEngines starts n engines with the same opts side by side (their
// imports and loads overlap) and waits until all of them serve.
func StartEngines(t testing.TB, n int, opts EngineOptions) []*Engine {
	t.Helper()
	inst := VLLM(t)
	if len(opts.Args) == 0 || strings.HasPrefix(opts.Args[0], "-") {
		t.Fatalf("testenv: engine args must start with the model path, as the fleet renders them: %q", opts.Args)
	}
	engines := make([]*Engine, n)
	for i := range engines {
		slot, err := takeEngineSlot()
		if err != nil {
			unavailable(t, "a network namespace for a vLLM engine", err, "run as root with iproute2 (make deps)")
		}
		e := newEngine(inst, slot, opts)
		stopS3 := func() {}
		if opts.S3 != nil {
			env, stop, err := engineS3Env(slot, opts.S3)
			if err != nil {
				dropEngineNetwork(slot)
				t.Fatalf("testenv: %v", err)
			}
			for k, v := range env {
				e.env = append(e.env, k+"="+v)
			}
			stopS3 = stop
		}
		engines[i] = e
		onStop(func(bool) { e.Stop(); stopS3(); dropEngineNetwork(slot) })
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.start() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			unavailable(t, "vLLM engine "+engines[i].Name, err, "see the engine's log above")
		}
	}
	return engines
}

func newEngine(inst VLLMInstall, slot int, opts EngineOptions) *Engine {
	e := &Engine{Name: fmt.Sprintf("vllm-%d", slot), IP: fmt.Sprintf("10.251.%d.2", slot), inst: inst, slot: slot}
	model := inst.Model
	if strings.HasPrefix(opts.Args[0], "s3://") {
		model = opts.Args[0]
	}
	e.args = append([]string{model}, opts.Args[1:]...)
	for i, a := range e.args {
		e.args[i] = strings.ReplaceAll(a, "$(POD_IP)", e.IP)
	}
	e.URL = "http://" + e.IP + ":" + flagValue(e.args, "--port", "8000")
	gib := opts.KVCacheGiB
	if gib == 0 {
		gib = 1
	}
	e.env = []string{"USER=llmd", "HF_HUB_OFFLINE=1", "VLLM_TARGET_DEVICE=cpu", "VLLM_NO_USAGE_STATS=1",
		fmt.Sprintf("VLLM_CPU_KVCACHE_SPACE=%d", gib), fmt.Sprintf("VLLM_CPU_OMP_THREADS_BIND=%d", slot%runtime.NumCPU())}
	for k, v := range opts.Env {
		e.env = append(e.env, k+"="+v)
	}
	return e
}

// start runs the engine's process in its namespace and waits for /health.
func (e *Engine) start() error {
	args := append([]string{"netns", "exec", engineNetns(e.slot), e.inst.Python, "-m", "vllm.entrypoints.cli.main", "serve"}, e.args...)
	p, err := startProcess(fmt.Sprintf("%s-%d", e.Name, time.Now().UnixNano()), "ip", args, e.env)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.proc = p
	e.mu.Unlock()
	client := &http.Client{Timeout: 2 * time.Second}
	return p.waitReady(engineBoot, httpOK(client, e.URL+"/health"))
}

// Restart stops the engine and starts a new process with the same
// arguments: a restarted pod (sequence numbers from 0, an empty cache).
func (e *Engine) Restart(t testing.TB) {
	t.Helper()
	e.Stop()
	if err := e.start(); err != nil {
		t.Fatalf("restarting %s: %v", e.Name, err)
	}
}

// Stop ends the engine (SIGTERM, then SIGKILL) and waits for it.
func (e *Engine) Stop() {
	if p := e.process(); p != nil {
		p.stop()
	}
}

// Terminate sends SIGTERM to the engine's server process alone, as the
// kubelet signals a container's first process when its pod is deleted
// (after the preStop hook), and returns without waiting.
func (e *Engine) Terminate() {
	if p := e.process(); p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// Kill ends the engine at once, as an OOM kill or a lost node does.
func (e *Engine) Kill() { e.signal(syscall.SIGKILL) }

// Pause freezes every process of the engine (SIGSTOP): it keeps its
// connections and answers nothing, as a hung pod does. Resume undoes it.
func (e *Engine) Pause() { e.signal(syscall.SIGSTOP) }

// Resume lets a paused engine run again.
func (e *Engine) Resume() { e.signal(syscall.SIGCONT) }

func (e *Engine) signal(sig syscall.Signal) {
	if p := e.process(); p != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// Exited reports whether the engine's process has ended.
func (e *Engine) Exited() bool {
	p := e.process()
	if p == nil {
		return true
	}
	ended, _ := p.exited()
	return ended
}

// LogTail is the last n lines of the engine's log.
func (e *Engine) LogTail(n int) string {
	if p := e.process(); p != nil {
		return p.logTail(n)
	}
	return ""
}

func (e *Engine) process() *process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc
}

// Args are the arguments the engine runs with (model path and address expanded).
func (e *Engine) Args() []string { return append([]string(nil), e.args...) }

// ZMQ is the address of one of the engine's ports, e.g. ZMQ(5557).
func (e *Engine) ZMQ(port int) string { return fmt.Sprintf("tcp://%s:%d", e.IP, port) }

// flagValue is the value of the last `name value` in args, or def.
func flagValue(args []string, name, def string) string {
	v := def
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			v = args[i+1]
		}
	}
	return v
}

// maxEngineSlots bounds the engines all test binaries on this machine run
// at once; each slot is a /30 in 10.251.0.0/16.
const maxEngineSlots = 32

var slotLocks sync.Map // slot -> *os.File holding its lock

// takeEngineSlot claims a free slot (a lock file held while this binary
// runs, so parallel test binaries never share an address) and gives it a
// network namespace joined to the host by a veth pair.
func takeEngineSlot() (int, error) {
	cache, err := CacheDir()
	if err != nil {
		return 0, err
	}
	for slot := 0; slot < maxEngineSlots; slot++ {
		if _, held := slotLocks.Load(slot); held {
			continue
		}
		f, err := os.OpenFile(filepath.Join(cache, fmt.Sprintf("vllm-slot-%d.lock", slot)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		slotLocks.Store(slot, f)
		dropEngineNetwork(slot) // what a crashed run left
		if err := makeEngineNetwork(slot); err != nil {
			dropEngineNetwork(slot)
			return 0, err
		}
		return slot, nil
	}
	return 0, fmt.Errorf("all %d engine slots are taken", maxEngineSlots)
}

func engineNetns(slot int) string { return fmt.Sprintf("llmd-vllm-%d", slot) }
func engineVeth(slot int) string  { return fmt.Sprintf("llmdv%d", slot) }

func makeEngineNetwork(slot int) error {
	ns, host, peer := engineNetns(slot), engineVeth(slot), engineVeth(slot)+"p"
	for _, c := range [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"addr", "add", fmt.Sprintf("10.251.%d.1/30", slot), "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns, "addr", "add", fmt.Sprintf("10.251.%d.2/30", slot), "dev", peer},
		{"-n", ns, "link", "set", peer, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// dropEngineNetwork removes a slot's namespace and veth pair, if any.
func dropEngineNetwork(slot int) {
	_ = exec.Command("ip", "netns", "del", engineNetns(slot)).Run()
	_ = exec.Command("ip", "link", "del", engineVeth(slot)).Run()
}
