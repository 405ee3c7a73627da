package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
)

// TestReplayKeepsTheLastBufferSteps publishes more messages than the replay
// buffer holds and replays through the router's transport: a replay from 0
// starts at the oldest kept seq (which the router treats as a gap), a
// replay from inside the buffer starts where asked, and one past the end
// returns only the end marker.
func TestReplayKeepsTheLastBufferSteps(t *testing.T) {
	p, err := newPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "kv@test", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	for i := range 5 {
		if err := p.publish([]byte(fmt.Sprintf("payload-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	feed, err := (&zmqtransport.Transport{}).Open(kvevents.Endpoint{Pod: "p", Addr: p.pubAddr, ReplayAddr: p.replAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	for _, c := range []struct {
		start uint64
		want  string
	}{{0, "[2:payload-2 3:payload-3 4:payload-4]"}, {3, "[3:payload-3 4:payload-4]"}, {5, "[]"}} {
		var got []string
		err := feed.Replay(c.start, 5*time.Second, func(m kvevents.Message) error {
			got = append(got, fmt.Sprintf("%d:%s", m.Seq, m.Payload))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("replay from %d = %v, want %s", c.start, got, c.want)
		}
	}
}
