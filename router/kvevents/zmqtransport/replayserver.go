package zmqtransport

import (
	"encoding/binary"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// Kept is one message a publisher keeps for replay.
type Kept struct {
	Seq     uint64
	Payload []byte
}

// ServeReplay is the publisher's side of vLLM's replay protocol, for the
// simulator and tests: on router, a bound ROUTER socket, it answers each
// request ["", start(8)] with ["", seq(8), payload] for every message
// kept(start) returns, then the end marker ["", ff*8, ""], until stop is
// closed; then it closes router. Other messages are ignored, as vLLM
// ignores them. kept runs on this goroutine and must copy what it shares.
func ServeReplay(router *zmq.Socket, stop <-chan struct{}, kept func(start uint64) []Kept) {
	defer router.Close()
	poller := zmq.NewPoller()
	poller.Add(router, zmq.POLLIN)
	for {
		select {
		case <-stop:
			return
		default:
		}
		polled, err := poller.Poll(50 * time.Millisecond)
		if err != nil || len(polled) == 0 {
			continue
		}
		frames, err := router.RecvMessageBytes(0)
		if err != nil || len(frames) != 3 || len(frames[2]) != 8 {
			continue
		}
		id := frames[0]
		for _, k := range kept(binary.BigEndian.Uint64(frames[2])) {
			if _, err := router.SendMessage(id, "", binary.BigEndian.AppendUint64(nil, k.Seq), k.Payload); err != nil {
				break
			}
		}
		router.SendMessage(id, "", binary.BigEndian.AppendUint64(nil, endSeq), "")
	}
}
