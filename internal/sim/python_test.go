package sim

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestEventsReadByPythonSubscriber has pyzmq and msgpack, written outside
// this project, read the replica's PUB and replay sockets: frames, seq and
// the map-form batch must be what a vLLM consumer expects.
func TestEventsReadByPythonSubscriber(t *testing.T) {
	py := testenv.Python(t, "zmq", "msgpack")
	f := startFleet(t, 1, ReplicaConfig{Model: "m", Engine: DefaultEngineConfig(), TimeScale: 100})
	info := f.Infos[0]
	cmd := exec.Command(py, "testdata/kvsub.py", info.KV, info.Replay)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives a killed test binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<24)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("subscriber did not start: %v", lines.Err())
	}
	// A SUB misses what is published before its subscription reaches the
	// PUB, so prompts are sent until the subscriber reports one.
	got := make(chan string, 1)
	go func() {
		if lines.Scan() {
			got <- lines.Text()
		}
		close(got)
	}()
	var prompts [][]uint32
	var report string
	for report == "" {
		p := sequence(32, uint32(1000*len(prompts)))
		prompts = append(prompts, p)
		resp := post(t, info.HTTP+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 1})
		resp.Body.Close()
		select {
		case line, ok := <-got:
			if !ok {
				t.Fatalf("subscriber ended: %v", lines.Err())
			}
			report = line
		case <-time.After(100 * time.Millisecond):
		}
	}
	var r struct {
		Topic string
		Seq   uint64
		Batch struct {
			TS     float64 `json:"ts"`
			Events []struct {
				Type        string   `json:"type"`
				BlockHashes []uint64 `json:"block_hashes"`
				Parent      *uint64  `json:"parent_block_hash"`
				TokenIDs    []uint32 `json:"token_ids"`
				BlockSize   int      `json:"block_size"`
				Medium      string   `json:"medium"`
			} `json:"events"`
		}
		Replayed []struct {
			Seq   uint64
			Batch json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		t.Fatalf("report %q: %v", report, err)
	}
	if r.Topic != info.Topic || r.Batch.TS < float64(time.Now().Add(-time.Minute).Unix()) || len(r.Batch.Events) != 1 {
		t.Fatalf("message: topic %q (want %q), ts %v, %d events", r.Topic, info.Topic, r.Batch.TS, len(r.Batch.Events))
	}
	ev := r.Batch.Events[0]
	if ev.Type != "BlockStored" || len(ev.BlockHashes) != 2 || ev.Parent != nil || ev.BlockSize != 16 || ev.Medium != "GPU" ||
		!slices.ContainsFunc(prompts, func(p []uint32) bool { return slices.Equal(p, ev.TokenIDs) }) {
		t.Fatalf("event %+v is not the two blocks of a prompt sent", ev)
	}
	if len(r.Replayed) <= int(r.Seq) {
		t.Fatalf("replay from 0 returned %d messages, live seq was %d", len(r.Replayed), r.Seq)
	}
	for i, m := range r.Replayed {
		if m.Seq != uint64(i) {
			t.Fatalf("replayed message %d has seq %d", i, m.Seq)
		}
	}
	var live struct{ Batch any }
	var replayed any
	if err := json.Unmarshal([]byte(report), &live); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Replayed[r.Seq].Batch, &replayed); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.Batch, replayed) {
		t.Fatalf("replayed seq %d differs from the live message:\n%v\n%v", r.Seq, replayed, live.Batch)
	}
}
