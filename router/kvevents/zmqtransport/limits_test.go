package zmqtransport

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// TestFollowsBeyondTheDefaultSocketLimit opens the feeds of 400 pods, 2,000
// sockets (a SUB, its monitor, the PAIR reading it and a wake-up pipe's two
// ends per pod), past libzmq's default per-context limit of 1,023
// (ZMQ_MAX_SOCKETS_DFLT, zmq.h), which would refuse the 205th pod. Their publishers are not up: libzmq keeps
// reconnecting in the background, as it does for a pod still loading.
func TestFollowsBeyondTheDefaultSocketLimit(t *testing.T) {
	const pods = 400
	tr := &Transport{}
	var feeds []kvevents.Feed
	t.Cleanup(func() {
		for _, f := range feeds {
			f.Close()
		}
	})
	for i := range pods {
		f, err := tr.Open(kvevents.Endpoint{Pod: "pod", Addr: "tcp://127.0.0.1:1", Topic: "kv"})
		if err != nil {
			t.Fatalf("feed %d of %d: %v", i+1, pods, err)
		}
		feeds = append(feeds, f)
	}
}

// TestStopWakesTheFollowers follows three publishers with a poll of an hour:
// removing one pod, then closing the ingestor, must each return once the
// followers are woken, not when their polls end.
func TestStopWakesTheFollowers(t *testing.T) {
	engines := newEngines(t, 1, 1, pubOptions{form: kvevents.FormMap}, pubOptions{form: kvevents.FormMap},
		pubOptions{form: kvevents.FormMap})
	in, err := kvevents.New(kvevents.Config{Index: index.New(index.Config{}), Poll: time.Hour, Logf: t.Logf,
		Transport: &Transport{ReconnectMin: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engines {
		ep := e.pub.endpoint()
		ep.Pod = e.id.Pod
		if err := in.Add(ep); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every publisher connected", nil, func() string {
		if c := in.Stats().Connections; c < int64(len(engines)) {
			return fmt.Sprintf("%d connections", c)
		}
		return ""
	})
	returns := func(what string, stop func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // against an hour's poll
			t.Fatalf("%s still waiting on the followers' poll", what)
		}
	}
	returns("Remove", func() { in.Remove(engines[0].id.Pod) })
	if p := in.Stats().Pods; p != 2 {
		t.Fatalf("%d endpoints followed after removing one of 3", p)
	}
	returns("Close", in.Close)
}
