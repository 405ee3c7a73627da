package kvevents

import (
	"encoding/binary"
	"math"
)

// writer appends msgpack in the compact forms Python's msgpack and msgspec
// choose (smallest int encoding, float64, str8 for short strings), so that
// encoded batches are byte-identical to what vLLM sends.
type writer struct {
	b []byte
}

func (w *writer) nil() { w.b = append(w.b, 0xc0) }

func (w *writer) uint(v uint64) {
	switch {
	case v <= 0x7f:
		w.b = append(w.b, byte(v))
	case v <= math.MaxUint8:
		w.b = append(w.b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		w.b = binary.BigEndian.AppendUint32(append(w.b, 0xce), uint32(v))
	default:
		w.b = binary.BigEndian.AppendUint64(append(w.b, 0xcf), v)
	}
}

func (w *writer) int(v int64) {
	switch {
	case v >= 0:
		w.uint(uint64(v))
	case v >= -32:
		w.b = append(w.b, byte(int8(v)))
	case v >= math.MinInt8:
		w.b = append(w.b, 0xd0, byte(int8(v)))
	case v >= math.MinInt16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, 0xd1), uint16(int16(v)))
	case v >= math.MinInt32:
		w.b = binary.BigEndian.AppendUint32(append(w.b, 0xd2), uint32(int32(v)))
	default:
		w.b = binary.BigEndian.AppendUint64(append(w.b, 0xd3), uint64(v))
	}
}

func (w *writer) float(v float64) {
	w.b = binary.BigEndian.AppendUint64(append(w.b, 0xcb), math.Float64bits(v))
}

func (w *writer) str(s string) {
	n := len(s)
	switch {
	case n <= 31:
		w.b = append(w.b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		w.b = append(w.b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, 0xda), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, 0xdb), uint32(n))
	}
	w.b = append(w.b, s...)
}

func (w *writer) header(n int, fix, h16, h32 byte) {
	switch {
	case n <= 15:
		w.b = append(w.b, fix|byte(n))
	case n <= math.MaxUint16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, h16), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, h32), uint32(n))
	}
}

func (w *writer) array(n int)     { w.header(n, 0x90, 0xdc, 0xdd) }
func (w *writer) mapHeader(n int) { w.header(n, 0x80, 0xde, 0xdf) }
