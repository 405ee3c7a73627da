package index

import (
	"math/rand/v2"
	"testing"
)

// TestTableMatchesGoMap runs random puts and deletes, with keys drawn from a
// small range so they collide, displace and shift, against a Go map.
func TestTableMatchesGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	model := map[uint64]uint64{}
	for step := 0; step < 200_000; step++ {
		k := uint64(rng.IntN(3000))
		if rng.IntN(8) == 0 {
			k = rng.Uint64() // the whole range, and 0 sometimes via IntN
		}
		switch rng.IntN(4) {
		case 3:
			bits := rng.Uint64()
			v := tb.ref(k)
			if old := *v; old != model[k] {
				t.Fatalf("step %d: ref(%d) found %d, model had %d", step, k, old, model[k])
			}
			*v |= bits
			model[k] |= bits
		case 0, 1:
			v := rng.Uint64()
			old, had := tb.swap(k, v)
			if mv, ok := model[k]; had != ok || old != mv {
				t.Fatalf("step %d: swap(%d) returned %d,%v, model had %d,%v", step, k, old, had, mv, ok)
			}
			model[k] = v
		default:
			tb.del(k)
			delete(model, k)
		}
		if step%1000 == 0 || step > 199_000 {
			if tb.len() != len(model) {
				t.Fatalf("step %d: table has %d entries, model %d", step, tb.len(), len(model))
			}
			for mk, mv := range model {
				if v, ok := tb.get(mk); !ok || v != mv {
					t.Fatalf("step %d: get(%d) = %d,%v, want %d", step, mk, v, ok, mv)
				}
			}
			seen := 0
			tb.each(rng.IntN(100), func(k, v uint64) bool {
				if model[k] != v {
					t.Fatalf("each yields %d=%d, model has %d", k, v, model[k])
				}
				seen++
				return true
			})
			if seen != len(model) {
				t.Fatalf("each yielded %d entries, want %d", seen, len(model))
			}
		}
		if step == 150_000 {
			tb.clear()
			clear(model)
		}
		if _, ok := tb.get(k); ok != hasKey(model, k) {
			t.Fatalf("step %d: presence of %d disagrees", step, k)
		}
	}
}

func hasKey(m map[uint64]uint64, k uint64) bool { _, ok := m[k]; return ok }

// TestTableReserve: a reserved table takes n entries without growing, and
// keeps every one.
func TestTableReserve(t *testing.T) {
	var tb table
	tb.reserve(1000)
	size := len(tb.slots)
	for k := uint64(1); k <= 1000; k++ {
		tb.put(k*0x9e3779b97f4a7c15, k)
	}
	if len(tb.slots) != size {
		t.Errorf("grew from %d to %d slots for the 1000 entries reserved", size, len(tb.slots))
	}
	for k := uint64(1); k <= 1000; k++ {
		if v, ok := tb.get(k * 0x9e3779b97f4a7c15); !ok || v != k {
			t.Fatalf("key %d: %d, %v", k, v, ok)
		}
	}
}
