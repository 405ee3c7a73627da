package kvevents

import (
	"os"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

func newTestStream(ix *index.Index) *stream {
	return newStream(Endpoint{Pod: "p"}, nil, ix, &counters{}, 0, func(string, ...any) {})
}

func golden1(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/golden/" + name + ".msgpack")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestApplyGoldenBatches applies golden payloads event by event and checks
// what the index then answers: adapters and extra keys take part in the key,
// removals and clears apply in order, and events the index cannot place are
// counted rather than guessed.
func TestApplyGoldenBatches(t *testing.T) {
	t.Run("map_newest", func(t *testing.T) {
		ix := index.New(index.Config{})
		s := newTestStream(ix)
		var b Batch
		if err := DecodeBatch(golden1(t, "map_newest"), &b); err != nil {
			t.Fatal(err)
		}
		stored := b.Events[0]
		// The blocks' tuples are (adapter, image item, salt) and (adapter):
		// keyed under the adapter's root with the rest as extra keys.
		own := [][]byte{tuple(false, tuple(false, "img-hash-1", 0), "salt"), nil}
		keys := index.Keys(nil, stored.TokenIDs, stored.BlockSize, "chat-lora", own)
		plain := index.Keys(nil, stored.TokenIDs, stored.BlockSize, "", nil)
		e := index.Engine{Pod: "p"}
		s.applyEvent(e, &b.Events[0])
		if m := ix.Lookup(keys, nil); len(m) != 1 || m[0].Blocks != 2 {
			t.Fatalf("after BlockStored: %+v", m)
		}
		if m := ix.Lookup(plain, nil); len(m) != 0 {
			t.Fatalf("keys without adapter and extra keys matched %+v", m)
		}
		s.applyEvent(e, &b.Events[1]) // BlockRemoved of the first block
		if m := ix.Lookup(keys, nil); len(m) != 0 {
			t.Fatalf("after removing block 0: %+v", m)
		}
		s.applyEvent(e, &b.Events[2])
		if st := ix.Stats(); st.Keys != 0 || st.Purges != 1 {
			t.Fatalf("after AllBlocksCleared: %+v", st)
		}
	})
	t.Run("array_legacy_signed", func(t *testing.T) {
		ix := index.New(index.Config{})
		s := newTestStream(ix)
		var b Batch
		if err := DecodeBatch(golden1(t, "array_legacy_signed"), &b); err != nil {
			t.Fatal(err)
		}
		ev := b.Events[0]
		if LoRAKey(&ev) != "lora-id:7" {
			t.Fatalf("adapter key %q", LoRAKey(&ev))
		}
		// Its parent (-1) was never stored: three orphans, no keys.
		s.applyEvent(index.Engine{Pod: "p"}, &b.Events[0])
		if st := ix.Stats(); st.Orphans != 3 || st.Keys != 0 {
			t.Fatalf("orphans %+v", st)
		}
		s.applyEvent(index.Engine{Pod: "p"}, &b.Events[1]) // removes orphan -5
		if st := ix.Stats(); st.Orphans != 2 {
			t.Fatalf("after removing an orphan: %+v", st)
		}
	})
	t.Run("skipped", func(t *testing.T) {
		ix := index.New(index.Config{})
		s := newTestStream(ix)
		for _, name := range []string{"map_all_fields", "map_cpu_without_tokens", "map_unknown_fields"} {
			s.onLive(Message{Seq: 0, Payload: golden1(t, name)})
			s.ranks = make(map[int]*rankState) // each payload as a fresh engine's first message
		}
		st, is := s.c.snapshot(), ix.Stats()
		if st.OtherGroupEvents != 1 || st.UnknownEvents != 1 || is.Unresolved != 2 || st.Stored != 2 {
			t.Fatalf("ingest %+v index %+v", st, is)
		}
		// map_unknown_fields' BlockStored carries two fields no vLLM sends;
		// the unknown kind's own fields are not counted again.
		if st.UnknownFields != 2 {
			t.Fatalf("unknown fields %d, want 2", st.UnknownFields)
		}
	})
	t.Run("unknown fields named", func(t *testing.T) {
		for name, want := range map[string]struct {
			n     int
			first string
		}{"map_all_fields": {0, ""}, "map_unknown_fields": {2, "future_field"}, "array_all_fields_future": {1, "element 12"}} {
			var b Batch
			if err := DecodeBatch(golden1(t, name), &b); err != nil {
				t.Fatal(name, err)
			}
			if ev := b.Events[0]; ev.UnknownFields != want.n || ev.UnknownField != want.first {
				t.Errorf("%s: unknown fields %d (first %q), want %d (%q)", name, ev.UnknownFields, ev.UnknownField, want.n, want.first)
			}
		}
	})
}
