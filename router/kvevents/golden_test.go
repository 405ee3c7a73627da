package kvevents

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// golden is what gen_golden.py says a payload means.
type golden struct {
	TS     float64       `json:"ts"`
	DPRank *int          `json:"dp_rank"`
	Events []goldenEvent `json:"events"`
	Encode *string       `json:"encode"`
	Error  string        `json:"error"`
}

type goldenEvent struct {
	Kind          string     `json:"kind"`
	BlockHashes   []string   `json:"block_hashes"`
	Parent        *string    `json:"parent"`
	TokenIDs      []uint32   `json:"token_ids"`
	BlockSize     int        `json:"block_size"`
	LoRAID        *int64     `json:"lora_id"`
	LoRAName      string     `json:"lora_name"`
	Medium        string     `json:"medium"`
	ExtraKeys     *[]*string `json:"extra_keys"`
	GroupIdx      int        `json:"group_idx"`
	SpecKind      string     `json:"spec_kind"`
	SlidingWindow *int       `json:"sliding_window"`
}

type goldenCase struct {
	name    string
	payload []byte
	want    golden
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	files, err := filepath.Glob("testdata/golden/*.msgpack")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden payloads under testdata/golden (regenerate with testdata/gen_golden.py): %v", err)
	}
	var cases []goldenCase
	for _, f := range files {
		payload, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := os.ReadFile(strings.TrimSuffix(f, ".msgpack") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		c := goldenCase{name: strings.TrimSuffix(filepath.Base(f), ".msgpack"), payload: payload}
		if err := json.Unmarshal(meta, &c.want); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// batch converts the golden meaning into the Batch the decoder must produce.
func (g *golden) batch(t testing.TB) Batch {
	t.Helper()
	b := Batch{TS: g.TS}
	if g.DPRank != nil {
		b.DPRank, b.HasDPRank = *g.DPRank, true
	}
	for _, ge := range g.Events {
		e := Event{BlockSize: ge.BlockSize, LoRAName: ge.LoRAName, Medium: ge.Medium, GroupIdx: ge.GroupIdx,
			SpecKind: ge.SpecKind, TokenIDs: ge.TokenIDs}
		for k := KindUnknown; k <= AllBlocksCleared; k++ {
			if k.String() == ge.Kind {
				e.Kind = k
			}
		}
		for _, h := range ge.BlockHashes {
			e.BlockHashes = append(e.BlockHashes, parseU64(t, h))
		}
		if ge.Parent != nil {
			e.ParentHash, e.HasParent = parseU64(t, *ge.Parent), true
		}
		if ge.LoRAID != nil {
			e.LoRAID, e.HasLoRAID = *ge.LoRAID, true
		}
		if ge.SlidingWindow != nil {
			e.SlidingWindow, e.HasSlidingWindow = *ge.SlidingWindow, true
		}
		if ge.ExtraKeys != nil {
			e.ExtraKeys = [][]byte{}
			for _, x := range *ge.ExtraKeys {
				var raw []byte
				if x != nil {
					var err error
					if raw, err = hex.DecodeString(*x); err != nil {
						t.Fatal(err)
					}
				}
				e.ExtraKeys = append(e.ExtraKeys, raw)
			}
		}
		b.Events = append(b.Events, e)
	}
	return b
}

func parseU64(t testing.TB, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// canon strips buffer capacity and nil-versus-empty differences so batches
// compare by meaning. The golden files do not describe unknown fields
// (TestApply's "unknown fields named" checks them).
func canon(b *Batch) Batch {
	out := Batch{TS: b.TS, DPRank: b.DPRank, HasDPRank: b.HasDPRank}
	for _, e := range b.Events {
		c := e
		c.extraBuf = nil
		c.UnknownFields, c.UnknownField = 0, ""
		if len(c.BlockHashes) == 0 {
			c.BlockHashes = nil
		}
		if len(c.TokenIDs) == 0 {
			c.TokenIDs = nil
		}
		if c.ExtraKeys != nil {
			c.ExtraKeys = append([][]byte{}, c.ExtraKeys...)
		}
		out.Events = append(out.Events, c)
	}
	return out
}

func TestDecodeGolden(t *testing.T) {
	var reused Batch // one Batch across cases proves buffer reuse leaks nothing
	for _, c := range loadGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			err := DecodeBatch(c.payload, &reused)
			if c.want.Error != "" {
				if err == nil {
					t.Fatalf("decoded malformed payload without error")
				}
				if !strings.Contains(err.Error(), c.want.Error) {
					t.Fatalf("error %q does not mention %q", err, c.want.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.want.batch(t)
			if got, w := canon(&reused), canon(&want); !reflect.DeepEqual(got, w) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, w)
			}
		})
	}
}

func TestEncodeMatchesGolden(t *testing.T) {
	encoded := 0
	for _, c := range loadGolden(t) {
		if c.want.Encode == nil {
			continue
		}
		form := FormMap
		if *c.want.Encode == "array" {
			form = FormArray
		}
		want := c.want.batch(t)
		got, err := EncodeBatch(form, &want)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got, c.payload) {
			t.Errorf("%s: encoded %s form\n%x\nwant (Python msgpack)\n%x", c.name, form, got, c.payload)
		}
		encoded++
	}
	if encoded < 6 {
		t.Fatalf("only %d golden cases are marked encodable", encoded)
	}
}

// TestProtocolsByteExample pins the generator to the byte example written in
// PROTOCOLS.md section 1, so the generator and the document cannot drift apart.
func TestProtocolsByteExample(t *testing.T) {
	want, _ := hex.DecodeString("93cb3ff0000000000000" + "91" + "97" + "ab" + hex.EncodeToString([]byte("BlockStored")) +
		"91cf0102030405060708" + "c0" + "9401020304" + "04" + "c0" + "a3" + hex.EncodeToString([]byte("GPU")) + "00")
	got, err := os.ReadFile("testdata/golden/array_protocols_example.msgpack")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("golden %x differs from the PROTOCOLS.md example %x", got, want)
	}
}

func TestRoundTripBothForms(t *testing.T) {
	for _, c := range loadGolden(t) {
		if c.want.Error != "" || hasUnknown(c.want.Events) {
			continue
		}
		want := c.want.batch(t)
		for _, form := range []Form{FormMap, FormArray} {
			enc, err := EncodeBatch(form, &want)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, form, err)
			}
			var got Batch
			if err := DecodeBatch(enc, &got); err != nil {
				t.Fatalf("%s %s: decoding own encoding: %v", c.name, form, err)
			}
			if g, w := canon(&got), canon(&want); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s %s round trip\n%+v\nwant\n%+v", c.name, form, g, w)
			}
		}
	}
}

func hasUnknown(evs []goldenEvent) bool {
	for _, e := range evs {
		if e.Kind == "unknown" {
			return true
		}
	}
	return false
}

// TestGoldenGeneratorInSync reruns the committed generator and checks that the
// committed payloads are exactly what it writes.
func TestGoldenGeneratorInSync(t *testing.T) {
	py := testenv.Python(t, "msgpack")
	dir := t.TempDir()
	if out, err := exec.Command(py, "testdata/gen_golden.py", dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_golden.py: %v\n%s", err, out)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*"))
	committed, _ := filepath.Glob("testdata/golden/*")
	if len(fresh) != len(committed) {
		t.Fatalf("generator writes %d files, %d committed", len(fresh), len(committed))
	}
	for _, f := range fresh {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join("testdata/golden", filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: committed file differs from generator output (rerun gen_golden.py): %v", filepath.Base(f), err)
		}
	}
}
