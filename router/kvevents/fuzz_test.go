package kvevents

import (
	"reflect"
	"testing"
)

// FuzzDecodeBatch feeds arbitrary payloads, seeded with every golden case.
// Decoding must never panic; whatever decodes must survive a round trip
// through both encodings unchanged.
func FuzzDecodeBatch(f *testing.F) {
	for _, c := range loadGolden(f) {
		f.Add(c.payload)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var b Batch
		if err := DecodeBatch(payload, &b); err != nil {
			return
		}
		for i := range b.Events {
			if b.Events[i].Kind == KindUnknown {
				return
			}
		}
		first := canon(&b)
		for _, form := range []Form{FormMap, FormArray} {
			enc, err := EncodeBatch(form, &first)
			if err != nil {
				t.Fatalf("%s: re-encoding a decoded batch: %v", form, err)
			}
			var again Batch
			if err := DecodeBatch(enc, &again); err != nil {
				t.Fatalf("%s: decoding own encoding %x: %v", form, enc, err)
			}
			if got := canon(&again); !reflect.DeepEqual(got, first) {
				t.Fatalf("%s round trip changed the batch\n%+v\nwant\n%+v", form, got, first)
			}
		}
	})
}
