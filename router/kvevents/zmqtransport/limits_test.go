package zmqtransport

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// TestFollowsBeyondTheDefaultSocketLimit opens the feeds of 400 pods, 1,200
// sockets (a SUB, its monitor and the PAIR reading it per pod), past libzmq's
// default per-context limit of 1,023 (ZMQ_MAX_SOCKETS_DFLT, zmq.h), which
// would refuse the 342nd pod. Their publishers are not up: libzmq keeps
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
