package peers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The wire form of every peer message is a frame of our own: a kind byte
// and fields in order, integers as uvarints, keys and hashes as 8 bytes
// little-endian. Decoding checks every count against a bound before it
// allocates, so a peer sending garbage costs a counted rejection, never
// memory or a crash.

const (
	// wireVersion changes with any change of the frame layout.
	wireVersion = 6
	// keyScheme names the router's block-key hash (index.BlockKey): peers
	// exchange keys, so replicas of versions that key blocks differently
	// must not (a rollout from such a version runs them independently).
	keyScheme = 1
)

// Frame kinds.
const (
	kindHello    = 'H'
	kindBatch    = 'B'
	kindChunk    = 'C'
	kindSnapDone = 'D' // the snapshot's end: no fields
)

// Bounds of one frame's contents.
const (
	maxFrameBytes = 4 << 20
	maxNameBytes  = 253 // a DNS subdomain, the longest pod name
	maxPods       = 4096
	maxSpecs      = 1 << 14
	maxKeys       = 1 << 16
	maxHoldIDs    = 1 << 17
	maxChains     = 1 << 12 // prompts of one request's KV demand
	maxClasses    = 64      // class names in one batch
	maxCount      = 1 << 24
	maxWork       = 1 << 40 // tokens per second
	maxRank       = 63
	maxBlocks     = 1 << 17
	maxBlockSize  = 1 << 16
	maxReplicaID  = 128
	chunkBlocks   = 1 << 16 // blocks per snapshot chunk sent
)

// hello opens both streams: who asks, and how it keys blocks.
type hello struct {
	Version, Scheme uint64
	ID              string
}

// load is one pod's in-flight requests and pending prefill tokens, in all
// and (Top, a part of Pending) of the highest priority class, as the
// sending replica counts its own.
type load struct {
	Pod                    string
	InFlight, Pending, Top int
}

// spec is one decision's speculative entries: hold ID, engine, keys.
type spec struct {
	Hold uint64
	Pod  string
	Rank int
	Keys []uint64
	// After is how long after its batch's SpecsSince it was decided.
	After time.Duration
}

// demand is one request's hold on a pod's KV cache at its longest, as
// package proxy's KV bound counts it: each prompt's full blocks by key
// (one chain per prompt of a completion batch) and its own blocks beyond
// them. It is held until the request ends.
type demand struct {
	ID     uint64
	Pod    string
	Own    int
	Chains [][]uint64
}

// keys is how many block keys d carries.
func (d *demand) keys() int {
	n := 0
	for _, c := range d.Chains {
		n += len(c)
	}
	return n
}

// batch is what a replica tells its peers since its last batch. A full
// batch carries every pod's load, the IDs of every hold not settled and of
// every KV demand not ended, which replace what the receiver kept of the
// sender.
type batch struct {
	ID   string
	Full bool
	// SpecsSince is when the oldest of Specs was decided, in the sender's
	// clock (Unix nanoseconds; 0 without specs), each spec's After counting
	// from it: how late the receiver learns each decision.
	SpecsSince int64
	BlockSize  int
	// Waiting is how many requests the sender holds waiting for a pod (its
	// queue, and those waiting for the fleet to scale from zero): part of
	// the fleet's demand its autoscaler reads from any one replica.
	Waiting int
	// Work is the work the sender placed on the fleet, tokens per second
	// (proxy.Server.Work): part of the fleet's work its autoscaler reads
	// from any one replica.
	Work    int
	Loads   []load
	Specs   []spec
	Settles []uint64
	Open    []uint64
	// Demands are the KV demands of requests placed since the last batch,
	// Ends those of requests ended, Live (full batches) every one not
	// ended.
	Demands []demand
	Ends    []uint64
	Live    []uint64
	// Came names the priority classes whose requests came to the sender
	// since its last batch (not every time: at most once a second each),
	// for the KV bound's guard.
	Came []string
}

// chunk is part of one engine's index in a snapshot, with the sender's
// place in the engine's event sequence; Last ends the engine.
type chunk struct {
	Pod, Addr string
	Rank      int
	Next      uint64
	LastTS    float64
	BlockSize int
	Blocks    []block
	Last      bool
}

// block is one block of a chunk (index.Block).
type block struct {
	Hash, Key uint64
	Tiers     uint8
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (h *hello) encode() []byte {
	b := []byte{kindHello}
	b = binary.AppendUvarint(b, h.Version)
	b = binary.AppendUvarint(b, h.Scheme)
	return appendString(b, h.ID)
}

func (m *batch) encode(b []byte) []byte {
	b = append(b, kindBatch)
	b = appendString(b, m.ID)
	b = appendBool(b, m.Full)
	b = binary.AppendUvarint(b, uint64(max(m.SpecsSince, 0)))
	b = binary.AppendUvarint(b, uint64(m.BlockSize))
	b = binary.AppendUvarint(b, uint64(max(m.Waiting, 0)))
	b = binary.AppendUvarint(b, uint64(max(m.Work, 0)))
	b = binary.AppendUvarint(b, uint64(len(m.Loads)))
	for _, l := range m.Loads {
		b = appendString(b, l.Pod)
		b = binary.AppendUvarint(b, uint64(l.InFlight))
		b = binary.AppendUvarint(b, uint64(l.Pending))
		b = binary.AppendUvarint(b, uint64(l.Top))
	}
	b = binary.AppendUvarint(b, uint64(len(m.Specs)))
	for _, s := range m.Specs {
		b = binary.AppendUvarint(b, s.Hold)
		b = appendString(b, s.Pod)
		b = binary.AppendUvarint(b, uint64(s.Rank))
		b = binary.AppendUvarint(b, uint64(max(s.After, 0)))
		b = appendKeys(b, s.Keys)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Demands)))
	for _, d := range m.Demands {
		b = binary.AppendUvarint(b, d.ID)
		b = appendString(b, d.Pod)
		b = binary.AppendUvarint(b, uint64(max(d.Own, 0)))
		b = binary.AppendUvarint(b, uint64(len(d.Chains)))
		for _, keys := range d.Chains {
			b = appendKeys(b, keys)
		}
	}
	for _, ids := range [][]uint64{m.Settles, m.Open, m.Ends, m.Live} {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.AppendUvarint(b, id)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Came)))
	for _, c := range m.Came {
		b = appendString(b, c)
	}
	return b
}

// appendKeys appends a count and that many keys.
func appendKeys(b []byte, keys []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return b
}

func (c *chunk) encode(b []byte) []byte {
	b = append(b, kindChunk)
	b = appendString(b, c.Pod)
	b = appendString(b, c.Addr)
	b = binary.AppendUvarint(b, uint64(c.Rank))
	b = binary.AppendUvarint(b, c.Next)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.LastTS))
	b = binary.AppendUvarint(b, uint64(c.BlockSize))
	b = binary.AppendUvarint(b, uint64(len(c.Blocks)))
	for _, bl := range c.Blocks {
		b = binary.LittleEndian.AppendUint64(b, bl.Hash)
		b = binary.LittleEndian.AppendUint64(b, bl.Key)
		b = append(b, bl.Tiers)
	}
	return appendBool(b, c.Last)
}

// errMalformed wraps every decoding failure.
var errMalformed = errors.New("malformed peer message")

// reader decodes one frame, remembering the first failure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
	}
}

func (r *reader) uvarint(what string, limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	if v > limit {
		r.fail("%s %d over %d", what, v, limit)
		return 0
	}
	return v
}

// count reads a length whose items take at least each bytes, so that a
// count the frame cannot hold fails before anything is allocated.
func (r *reader) count(what string, limit uint64, each int) int {
	n := r.uvarint(what, limit)
	if r.err == nil && n*uint64(each) > uint64(len(r.b)) {
		r.fail("%s %d longer than the frame", what, n)
		return 0
	}
	return int(n)
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("%s: short", what)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail("%s: short", what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bool(what string) bool {
	switch v := r.byte(what); v {
	case 0, 1:
		return v == 1
	default:
		r.fail("%s: %d is not a bool", what, v)
		return false
	}
}

func (r *reader) string(what string, limit uint64) string {
	n := r.count(what, limit, 1)
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// keys reads a count of at most limit and that many keys.
func (r *reader) keys(limit uint64) []uint64 {
	keys := make([]uint64, r.count("keys", limit, 8))
	for j := range keys {
		keys[j] = r.u64("key")
	}
	return keys
}

// name reads a pod name: not empty.
func (r *reader) name(what string) string {
	s := r.string(what, maxNameBytes)
	if r.err == nil && s == "" {
		r.fail("%s: empty", what)
	}
	return s
}

// end checks the frame was used up.
func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the frame", len(r.b))
	}
	return r.err
}

func (r *reader) kind(want byte) {
	if k := r.byte("kind"); r.err == nil && k != want {
		r.fail("kind %q, want %q", k, want)
	}
}

func decodeHello(b []byte) (hello, error) {
	r := reader{b: b}
	r.kind(kindHello)
	h := hello{Version: r.uvarint("version", math.MaxUint32), Scheme: r.uvarint("scheme", math.MaxUint32)}
	h.ID = r.string("id", maxReplicaID)
	return h, r.end()
}

func decodeBatch(b []byte) (batch, error) {
	r := reader{b: b}
	r.kind(kindBatch)
	var m batch
	m.ID = r.string("id", maxReplicaID)
	m.Full = r.bool("full")
	m.SpecsSince = int64(r.uvarint("specs since", math.MaxInt64))
	m.BlockSize = int(r.uvarint("block size", maxBlockSize))
	m.Waiting = int(r.uvarint("waiting", maxCount))
	m.Work = int(r.uvarint("work", maxWork))
	m.Loads = make([]load, r.count("loads", maxPods, 4))
	for i := range m.Loads {
		l := &m.Loads[i]
		l.Pod, l.InFlight = r.name("load pod"), int(r.uvarint("in flight", maxCount))
		l.Pending = int(r.uvarint("pending tokens", math.MaxInt32))
		l.Top = int(r.uvarint("top-class pending tokens", uint64(l.Pending)))
	}
	m.Specs = make([]spec, r.count("specs", maxSpecs, 4))
	for i := range m.Specs {
		s := &m.Specs[i]
		s.Hold = r.uvarint("hold", math.MaxUint64)
		s.Pod = r.name("spec pod")
		s.Rank = int(r.uvarint("rank", maxRank))
		s.After = time.Duration(r.uvarint("decided after", math.MaxInt64))
		s.Keys = r.keys(maxKeys)
	}
	m.Demands = make([]demand, r.count("demands", maxSpecs, 4))
	for i := range m.Demands {
		d := &m.Demands[i]
		d.ID = r.uvarint("demand id", math.MaxUint64)
		d.Pod = r.name("demand pod")
		d.Own = int(r.uvarint("own blocks", maxBlocks))
		d.Chains = make([][]uint64, r.count("chains", maxChains, 1))
		left := maxKeys // over every chain of the demand
		for j := range d.Chains {
			d.Chains[j] = r.keys(uint64(left))
			left -= len(d.Chains[j])
		}
	}
	for _, ids := range []*[]uint64{&m.Settles, &m.Open, &m.Ends, &m.Live} {
		*ids = make([]uint64, r.count("hold ids", maxHoldIDs, 1))
		for j := range *ids {
			(*ids)[j] = r.uvarint("hold id", math.MaxUint64)
		}
	}
	m.Came = make([]string, r.count("classes", maxClasses, 2))
	for i := range m.Came {
		m.Came[i] = r.name("class")
	}
	if err := r.end(); err != nil {
		return batch{}, err
	}
	return m, nil
}

func decodeChunk(b []byte) (chunk, error) {
	r := reader{b: b}
	r.kind(kindChunk)
	var c chunk
	c.Pod = r.name("pod")
	c.Addr = r.name("addr")
	c.Rank = int(r.uvarint("rank", maxRank))
	c.Next = r.uvarint("next seq", math.MaxUint64)
	c.LastTS = math.Float64frombits(r.u64("last ts"))
	if r.err == nil && (math.IsNaN(c.LastTS) || math.IsInf(c.LastTS, 0)) {
		r.fail("last ts %v", c.LastTS)
	}
	c.BlockSize = int(r.uvarint("block size", maxBlockSize))
	c.Blocks = make([]block, r.count("blocks", maxBlocks, 17))
	for i := range c.Blocks {
		c.Blocks[i] = block{Hash: r.u64("hash"), Key: r.u64("key"), Tiers: r.byte("tiers")}
	}
	c.Last = r.bool("last")
	if err := r.end(); err != nil {
		return chunk{}, err
	}
	return c, nil
}
