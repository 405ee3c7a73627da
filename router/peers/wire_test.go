package peers

import (
	"reflect"
	"testing"
	"time"
)

func sampleBatch() batch {
	return batch{ID: "router-7f-1a2b", Full: true, SpecsSince: 1764806400123456789, BlockSize: 16, Waiting: 37, Work: 21_500,
		Loads:   []load{{Pod: "vllm-0", InFlight: 3, Pending: 2048, Top: 2000}, {Pod: "vllm-1"}},
		Specs:   []spec{{Hold: 9, Pod: "vllm-1", Rank: 2, Keys: []uint64{1, 1 << 63, 42}, After: 1500 * time.Microsecond}},
		Settles: []uint64{7, 8}, Open: []uint64{9},
		Demands: []demand{{ID: 4, Pod: "vllm-0", Own: 70, Chains: [][]uint64{{3, 5}, {3, 6, 1 << 62}}}, {ID: 5, Pod: "vllm-1", Chains: [][]uint64{}}},
		Ends:    []uint64{2, 3}, Live: []uint64{4, 5}, Came: []string{"high", "standard"}}
}

func sampleChunk() chunk {
	return chunk{Pod: "vllm-0", Addr: "tcp://10.0.0.5:5557", Rank: 1, Next: 99, LastTS: 1733.25, BlockSize: 16,
		Blocks: []block{{Hash: 5, Key: 6, Tiers: 1}, {Hash: 7, Key: 8, Tiers: 3}}, Last: true}
}

func TestFramesRoundTrip(t *testing.T) {
	m := sampleBatch()
	got, err := decodeBatch(m.encode(nil))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("batch round trip: %+v, %v; want %+v", got, err, m)
	}
	c := sampleChunk()
	gc, err := decodeChunk(c.encode(nil))
	if err != nil || !reflect.DeepEqual(gc, c) {
		t.Errorf("chunk round trip: %+v, %v; want %+v", gc, err, c)
	}
	h := hello{Version: wireVersion, Scheme: keyScheme, ID: "x"}
	if gh, err := decodeHello(h.encode()); err != nil || gh != h {
		t.Errorf("hello round trip: %+v, %v", gh, err)
	}
}

func TestMalformedFramesAreRefused(t *testing.T) {
	m := sampleBatch()
	enc := m.encode(nil)
	for name, b := range map[string][]byte{
		"empty":          {},
		"wrong kind":     append([]byte{kindChunk}, enc[1:]...),
		"truncated":      enc[:len(enc)-1],
		"trailing bytes": append(append([]byte(nil), enc...), 0),
		"huge count":     {kindBatch, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad bool":       {kindBatch, 0, 7},
		"demand keys over maxKeys": (&batch{ID: "x", Demands: []demand{{ID: 1, Pod: "p",
			Chains: [][]uint64{make([]uint64, maxKeys/2), make([]uint64, maxKeys/2+1)}}}}).encode(nil),
		"demand without a pod":   (&batch{ID: "x", Demands: []demand{{ID: 1}}}).encode(nil),
		"class without a name":   (&batch{ID: "x", Came: []string{""}}).encode(nil),
		"top class over pending": (&batch{ID: "x", Loads: []load{{Pod: "p", Pending: 10, Top: 11}}}).encode(nil),
	} {
		if _, err := decodeBatch(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	c := sampleChunk()
	c.Pod = ""
	if _, err := decodeChunk(c.encode(nil)); err == nil {
		t.Error("a chunk without a pod decoded")
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic, and
// a batch that decodes re-encodes to no more bytes than its frame (nothing
// is made up that is not there; varints may re-encode shorter).
func FuzzDecode(f *testing.F) {
	m, c := sampleBatch(), sampleChunk()
	f.Add(m.encode(nil))
	f.Add(c.encode(nil))
	f.Add((&hello{Version: 1, Scheme: 1, ID: "a"}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeBatch(b); err == nil {
			if got := m.encode(nil); len(got) > len(b) {
				t.Fatalf("batch re-encodes longer than its frame: %d > %d", len(got), len(b))
			}
		}
		_, _ = decodeChunk(b)
		_, _ = decodeHello(b)
	})
}
