package kvevents

import (
	"bytes"
	"testing"
)

// tuple encodes a tuple of strings and ints as msgpack, the way vLLM's
// extra keys arrive (strings in their compact form unless long is set).
func tuple(long bool, elems ...any) []byte {
	var w writer
	w.array(len(elems))
	for _, e := range elems {
		switch v := e.(type) {
		case string:
			if long { // str16 where str8 or fixstr would do: a less compact encoder
				w.b = append(w.b, 0xda, 0, byte(len(v)))
				w.b = append(w.b, v...)
			} else {
				w.str(v)
			}
		case int:
			w.int(int64(v))
		case []byte:
			w.b = append(w.b, v...)
		}
	}
	return w.b
}

func TestIndexExtraKeys(t *testing.T) {
	mm := tuple(false, "img-hash-1", 0)
	for _, tc := range []struct {
		name string
		ev   Event
		want [][]byte
	}{
		{"adapter and salt", Event{LoRAName: "sql", ExtraKeys: [][]byte{tuple(false, "sql", "tenant"), tuple(false, "sql")}},
			[][]byte{SaltExtraKeys("tenant")[0], nil}},
		{"adapter only", Event{LoRAName: "sql", ExtraKeys: [][]byte{tuple(false, "sql"), tuple(false, "sql")}}, nil},
		{"older adapter id", Event{LoRAID: 7, HasLoRAID: true, ExtraKeys: [][]byte{tuple(false, 7, "s"), tuple(false, 7)}},
			[][]byte{SaltExtraKeys("s")[0], nil}},
		{"salt without adapter", Event{ExtraKeys: [][]byte{tuple(false, "s"), nil}}, [][]byte{SaltExtraKeys("s")[0], nil}},
		{"salt equal to no adapter's name", Event{ExtraKeys: [][]byte{tuple(false, "sql")}}, [][]byte{tuple(false, "sql")}},
		{"strings re-encoded compactly", Event{LoRAName: "sql", ExtraKeys: [][]byte{tuple(true, "sql", "tenant")}},
			[][]byte{SaltExtraKeys("tenant")[0]}},
		{"multimodal kept", Event{LoRAName: "chat", ExtraKeys: [][]byte{tuple(false, "chat", mm, "salt"), tuple(false, "chat")}},
			[][]byte{tuple(false, mm, "salt"), nil}},
		{"not a tuple", Event{ExtraKeys: [][]byte{{0x2a}}}, [][]byte{{0x2a}}},
		{"none", Event{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x extraKeys
			got := x.of(&tc.ev)
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("got %x, want %x", got, tc.want)
			}
			for i := range got {
				if !bytes.Equal(got[i], tc.want[i]) || (got[i] == nil) != (tc.want[i] == nil) {
					t.Fatalf("block %d: got %x, want %x", i, got[i], tc.want[i])
				}
			}
		})
	}
	if SaltExtraKeys("") != nil {
		t.Error("no salt, yet extra keys")
	}
}

// TestVLLMExtraKeysAsPythonEncodes compares the tuples the simulator
// publishes with ones Debian's python3-msgpack encoded in the golden cases,
// and checks that the index keys them as a request rebuilds them.
func TestVLLMExtraKeysAsPythonEncodes(t *testing.T) {
	for _, tc := range []struct {
		golden, lora, salt string
		block              int
	}{
		{"map_all_fields", "sql-lora", "salt-1", 0},
		{"map_newest", "chat-lora", "", 1},
	} {
		var b Batch
		if err := DecodeBatch(golden1(t, tc.golden), &b); err != nil {
			t.Fatal(err)
		}
		want := b.Events[0].ExtraKeys[tc.block]
		if got := VLLMExtraKeys(tc.lora, tc.salt, tc.block); !bytes.Equal(got, want) {
			t.Errorf("%s block %d: %x, python3-msgpack %x", tc.golden, tc.block, got, want)
		}
	}
	var x extraKeys
	ev := Event{LoRAName: "sql", ExtraKeys: [][]byte{VLLMExtraKeys("sql", "t", 0), VLLMExtraKeys("sql", "t", 1)}}
	if got := x.of(&ev); len(got) != 2 || !bytes.Equal(got[0], SaltExtraKeys("t")[0]) || got[1] != nil {
		t.Errorf("the index keys a salted adapter request's blocks as %x", got)
	}
	if VLLMExtraKeys("", "", 0) != nil || VLLMExtraKeys("", "t", 1) != nil {
		t.Error("extra keys where vLLM attaches none")
	}
}
