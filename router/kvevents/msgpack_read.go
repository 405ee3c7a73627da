package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxDepth bounds nesting when skipping values, so hostile input cannot
// exhaust the stack (extra_keys may hold nested tuples, nothing deeper).
const maxDepth = 32

// reader walks one msgpack document without allocating. Every read checks
// bounds and returns an error naming the offset, because payloads come from
// the network and must never panic the router.
type reader struct {
	b   []byte
	off int
}

func (r *reader) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", r.off, fmt.Sprintf(format, args...))
}

func (r *reader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.errf("unexpected end of data")
	}
	return r.b[r.off], nil
}

// take returns the next n bytes.
func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, r.errf("need %d bytes, have %d", n, len(r.b)-r.off)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

// uintN reads an n-byte big-endian length or number.
func (r *reader) uintN(n int) (uint64, error) {
	s, err := r.take(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(s)), nil
	default:
		return binary.BigEndian.Uint64(s), nil
	}
}

// typeName names a msgpack type byte for error messages.
func typeName(c byte) string {
	switch {
	case c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3):
		return "int"
	case c <= 0x8f || c == 0xde || c == 0xdf:
		return "map"
	case c <= 0x9f || c == 0xdc || c == 0xdd:
		return "array"
	case c <= 0xbf || (c >= 0xd9 && c <= 0xdb):
		return "str"
	case c == 0xc0:
		return "nil"
	case c == 0xc2 || c == 0xc3:
		return "bool"
	case c >= 0xc4 && c <= 0xc6:
		return "bin"
	case c == 0xca || c == 0xcb:
		return "float"
	case c == 0xc1:
		return "reserved byte 0xc1"
	default:
		return "ext"
	}
}

// nextIsNil consumes a nil and reports whether there was one.
func (r *reader) nextIsNil() bool {
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

// containerLen reads an array or map header; each element needs at least one
// byte (two for a map entry), so a length larger than the rest of the input is
// rejected before anyone allocates for it.
func (r *reader) containerLen(wantMap bool) (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n uint64
	isMap := false
	switch {
	case c >= 0x90 && c <= 0x9f:
		r.off++
		n = uint64(c & 0x0f)
	case c >= 0x80 && c <= 0x8f:
		r.off++
		n, isMap = uint64(c&0x0f), true
	case c == 0xdc || c == 0xde:
		r.off++
		n, err = r.uintN(2)
		isMap = c == 0xde
	case c == 0xdd || c == 0xdf:
		r.off++
		n, err = r.uintN(4)
		isMap = c == 0xdf
	default:
		if wantMap {
			return 0, r.errf("want map, got %s", typeName(c))
		}
		return 0, r.errf("want array, got %s", typeName(c))
	}
	if err != nil {
		return 0, err
	}
	if isMap != wantMap {
		if wantMap {
			return 0, r.errf("want map, got array")
		}
		return 0, r.errf("want array, got map")
	}
	per := uint64(1)
	if isMap {
		per = 2
	}
	if n > uint64(len(r.b)-r.off)/per {
		return 0, r.errf("length %d exceeds remaining %d bytes", n, len(r.b)-r.off)
	}
	return int(n), nil
}

func (r *reader) arrayLen() (int, error) { return r.containerLen(false) }
func (r *reader) mapLen() (int, error)   { return r.containerLen(true) }

// isMapNext reports whether the next value is a map (the newer vLLM encoding).
func (r *reader) isMapNext() bool {
	if r.off >= len(r.b) {
		return false
	}
	c := r.b[r.off]
	return (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf
}

// integer reads any msgpack integer. neg reports a negative signed value, in
// which case u holds its two's-complement bits.
func (r *reader) integer() (u uint64, neg bool, err error) {
	c, err := r.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case c <= 0x7f:
		r.off++
		return uint64(c), false, nil
	case c >= 0xe0:
		r.off++
		return uint64(int64(int8(c))), true, nil
	case c >= 0xcc && c <= 0xcf:
		r.off++
		u, err = r.uintN(1 << (c - 0xcc))
		return u, false, err
	case c >= 0xd0 && c <= 0xd3:
		r.off++
		n := 1 << (c - 0xd0)
		u, err = r.uintN(n)
		if err != nil {
			return 0, false, err
		}
		// Sign-extend from n bytes.
		shift := uint(64 - 8*n)
		v := int64(u<<shift) >> shift
		return uint64(v), v < 0, nil
	}
	return 0, false, r.errf("want int, got %s", typeName(c))
}

// int64 reads an integer that must fit in int64.
func (r *reader) int64() (int64, error) {
	u, neg, err := r.integer()
	if err != nil {
		return 0, err
	}
	if !neg && u > math.MaxInt64 {
		return 0, r.errf("integer %d overflows int64", u)
	}
	return int64(u), nil
}

// smallInt reads an integer that must fit in an int32, for sizes and indexes.
func (r *reader) smallInt() (int, error) {
	v, err := r.int64()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, r.errf("integer %d out of range", v)
	}
	return int(v), nil
}

// token reads a token id, which vLLM vocabularies keep well inside uint32.
func (r *reader) token() (uint32, error) {
	u, neg, err := r.integer()
	if err != nil {
		return 0, err
	}
	if neg || u > math.MaxUint32 {
		return 0, r.errf("token id %d out of range", int64(u))
	}
	return uint32(u), nil
}

// hash reads a vLLM block hash in any of its encodings and normalises it to
// uint64: ints keep their two's-complement bits, bins keep their last 8 bytes
// big-endian (the same rule vLLM applies when it converts digests to ints).
func (r *reader) hash() (uint64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if c >= 0xc4 && c <= 0xc6 {
		b, err := r.bin()
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, r.errf("empty bin hash")
		}
		var v uint64
		if len(b) > 8 {
			b = b[len(b)-8:]
		}
		for _, x := range b {
			v = v<<8 | uint64(x)
		}
		return v, nil
	}
	u, _, err := r.integer()
	if err != nil {
		return 0, r.errf("want int or bin hash, got %s", typeName(c))
	}
	return u, nil
}

func (r *reader) bin() ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	if c < 0xc4 || c > 0xc6 {
		return nil, r.errf("want bin, got %s", typeName(c))
	}
	r.off++
	n, err := r.uintN(1 << (c - 0xc4))
	if err != nil {
		return nil, err
	}
	return r.take(int(min(n, math.MaxInt32)))
}

// str reads a string without copying it.
func (r *reader) str() ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		r.off++
		n = uint64(c & 0x1f)
	case c >= 0xd9 && c <= 0xdb:
		r.off++
		n, err = r.uintN(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
	default:
		return nil, r.errf("want str, got %s", typeName(c))
	}
	return r.take(int(min(n, math.MaxInt32)))
}

// float reads a float64 timestamp; ints are accepted because some encoders
// shorten whole-number floats.
func (r *reader) float() (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xcb:
		r.off++
		u, err := r.uintN(8)
		return math.Float64frombits(u), err
	case 0xca:
		r.off++
		u, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(u))), err
	}
	v, err := r.int64()
	if err != nil {
		return 0, r.errf("want float, got %s", typeName(c))
	}
	return float64(v), nil
}

// skip passes over one value of any type.
func (r *reader) skip(depth int) error {
	if depth > maxDepth {
		return r.errf("nesting deeper than %d", maxDepth)
	}
	c, err := r.peek()
	if err != nil {
		return err
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		r.off++
		return nil
	case (c >= 0x80 && c <= 0x9f) || (c >= 0xdc && c <= 0xdf):
		isMap := (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf
		n, err := r.containerLen(isMap)
		if err != nil {
			return err
		}
		if isMap {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case (c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb):
		_, err := r.str()
		return err
	case c >= 0xc4 && c <= 0xc6:
		_, err := r.bin()
		return err
	case c >= 0xcc && c <= 0xd3:
		_, _, err := r.integer()
		return err
	case c == 0xca || c == 0xcb:
		_, err := r.float()
		return err
	case c >= 0xd4 && c <= 0xd8: // fixext: type byte + 1..16 data bytes
		_, err := r.take(2 + 1<<(c-0xd4))
		return err
	case c >= 0xc7 && c <= 0xc9:
		r.off++
		n, err := r.uintN(1 << (c - 0xc7))
		if err != nil {
			return err
		}
		_, err = r.take(int(min(n, math.MaxInt32-1)) + 1)
		return err
	}
	return r.errf("invalid type byte 0x%02x", c)
}

// raw passes over one value and returns its encoded bytes.
func (r *reader) raw() ([]byte, error) {
	start := r.off
	if err := r.skip(0); err != nil {
		return nil, err
	}
	return r.b[start:r.off], nil
}
