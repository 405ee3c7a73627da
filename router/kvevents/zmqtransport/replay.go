package zmqtransport

import (
	"encoding/binary"
	"fmt"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// endSeq marks the end of a replay stream.
const endSeq = ^uint64(0)

// Replay speaks vLLM's replay protocol: a DEALER sends ["", start(8)] to the
// engine's ROUTER, which answers with ["", seq(8), payload] per kept message
// (some versions put the topic before the seq) and ends with
// ["", ff*8, ""]. A REQ socket would accept only the first reply.
func (f *feed) Replay(start uint64, wait time.Duration, fn func(kvevents.Message) error) error {
	if f.ep.ReplayAddr == "" {
		return kvevents.ErrNoReplay
	}
	d, err := newSocket(zmq.DEALER)
	if err != nil {
		return fmt.Errorf("replay socket: %w", err)
	}
	defer d.Close()
	if err := d.SetLinger(0); err != nil {
		return fmt.Errorf("replay socket: %w", err)
	}
	if err := d.Connect(f.ep.ReplayAddr); err != nil {
		return fmt.Errorf("connecting replay %s: %w", f.ep.ReplayAddr, err)
	}
	if _, err := d.SendMessage("", binary.BigEndian.AppendUint64(nil, start)); err != nil {
		return fmt.Errorf("requesting replay from %d: %w", start, err)
	}
	poller := zmq.NewPoller()
	poller.Add(d, zmq.POLLIN)
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("replay from %s after %s: %w", f.ep.ReplayAddr, wait, kvevents.ErrReplayTimeout)
		}
		polled, err := poller.Poll(left)
		if err != nil {
			return fmt.Errorf("replay from %s: %w", f.ep.ReplayAddr, err)
		}
		if len(polled) == 0 {
			continue
		}
		frames, err := d.RecvMessageBytes(0)
		if err != nil {
			return fmt.Errorf("replay from %s: %w", f.ep.ReplayAddr, err)
		}
		m, end, err := parseReplay(frames)
		if err != nil {
			return fmt.Errorf("replay from %s: %w", f.ep.ReplayAddr, err)
		}
		if end {
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

// parseReplay accepts ["", seq, payload] and ["", topic, seq, payload].
func parseReplay(frames [][]byte) (m kvevents.Message, end bool, err error) {
	if len(frames) > 0 && len(frames[0]) == 0 {
		frames = frames[1:]
	}
	switch len(frames) {
	case 2:
		m.Payload = frames[1]
	case 3:
		m.Topic, frames = frames[0], frames[1:]
		m.Payload = frames[1]
	default:
		return m, false, fmt.Errorf("replay reply of %d frames", len(frames))
	}
	if len(frames[0]) != 8 {
		return m, false, fmt.Errorf("replay seq frame has %d bytes, want 8", len(frames[0]))
	}
	m.Seq = binary.BigEndian.Uint64(frames[0])
	return m, m.Seq == endSeq, nil
}
