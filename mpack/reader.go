package mpack

import (
	"fmt"
	"math"
)

// Mode is how a Reader reads structs (Fields).
type Mode uint8

const (
	// Exact reads a struct as a map holding every field exactly once, in
	// any order, each name a fixstr or str8: what the entry codec writes,
	// and all it accepts.
	Exact Mode = iota
	// Codec reads a struct as go-msgpack's reflective decoder reads one
	// into a zero value (with ErrorIfNoField): a map of its fields in any
	// order, names as str or bin, any field missing (left zero), and nil
	// for the zero value of a field or of the whole struct. An unknown
	// field is an error, as there; so is a repeated one, which go-msgpack
	// would let the last win but which no encoder writes. A struct as an
	// array (go-msgpack's StructToArray), which edictlog's records never
	// were, is refused.
	Codec
)

// Reader decodes msgpack from a byte slice. Every read checks the input
// left first; the first failure sticks (Err) and makes every later read a
// no-op returning a zero value, so a decoder is a straight line with one
// check at the end, and cannot panic on any input. The what arguments name
// the value read in errors; they are constants (the offset locates the
// value), so that reading allocates nothing but the values read.
type Reader struct {
	b    []byte
	off  int
	err  error
	mode Mode
}

// NewReader returns a Reader of b from offset off (the bytes before it, a
// version byte, count in the offsets errors give).
func NewReader(b []byte, off int, mode Mode) Reader {
	return Reader{b: b, off: off, mode: mode}
}

// Err returns the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns the offset of the next byte to read.
func (r *Reader) Offset() int { return r.off }

// Fail records a failure at the current offset, unless there is one.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at offset %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

// End fails if any input is left: a record is one value.
func (r *Reader) End() {
	if r.err == nil && r.off != len(r.b) {
		r.Fail("%d trailing bytes", len(r.b)-r.off)
	}
}

func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.Fail("need %d bytes, %d left", n, len(r.b)-r.off)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *Reader) byte1() byte {
	if r.err == nil && r.off < len(r.b) {
		c := r.b[r.off]
		r.off++
		return c
	}
	r.take(1) // fails, saying why
	return 0
}

// be reads an n-byte big-endian unsigned integer.
func (r *Reader) be(n int) uint64 {
	var v uint64
	for _, c := range r.take(n) {
		v = v<<8 | uint64(c)
	}
	return v
}

// Nil reads a nil if one is next, and reports whether it did.
func (r *Reader) Nil() bool {
	if r.err == nil && r.off < len(r.b) && r.b[r.off] == nilByte {
		r.off++
		return true
	}
	return false
}

// Uint reads an unsigned integer: any unsigned form, or a signed form of a
// non-negative value.
func (r *Reader) Uint(what string) uint64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c <= math.MaxInt8:
		return uint64(c)
	case c >= uint8Byte && c <= uint64Byte:
		return r.be(1 << (c - uint8Byte))
	case c >= int8Byte && c <= int64Byte:
		v := r.signed(c)
		if v < 0 {
			r.Fail("%s: negative value %d", what, v)
			return 0
		}
		return uint64(v)
	}
	r.Fail("%s: want an unsigned integer, got byte 0x%02x", what, c)
	return 0
}

// signed reads the body of the signed form c.
func (r *Reader) signed(c byte) int64 {
	switch c {
	case int8Byte:
		return int64(int8(r.be(1)))
	case int16Byte:
		return int64(int16(r.be(2)))
	case int32Byte:
		return int64(int32(r.be(4)))
	}
	return int64(r.be(8))
}

// Int reads a signed integer: any fixint or signed form, or an unsigned
// form of a value int64 holds.
func (r *Reader) Int(what string) int64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c <= math.MaxInt8 || c >= negFixInt:
		return int64(int8(c))
	case c >= int8Byte && c <= int64Byte:
		return r.signed(c)
	case c >= uint8Byte && c <= uint64Byte:
		v := r.be(1 << (c - uint8Byte))
		if v > math.MaxInt64 {
			r.Fail("%s: %d overflows int64", what, v)
			return 0
		}
		return int64(v)
	}
	r.Fail("%s: want an integer, got byte 0x%02x", what, c)
	return 0
}

// Bool reads a boolean, or the fixint 0 or 1, which go-msgpack reads as
// one too.
func (r *Reader) Bool(what string) bool {
	c := r.byte1()
	switch {
	case r.err != nil:
		return false
	case c == trueByte || c == 1:
		return true
	case c == falseByte || c == 0:
		return false
	}
	r.Fail("%s: want a boolean, got byte 0x%02x", what, c)
	return false
}

// raw reads the header of a str or bin (or a nil, of length 0) and returns
// its bytes, without copying them.
func (r *Reader) raw(what, want string) []byte {
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return nil
	case c == nilByte:
		return nil
	case c == bin8 || c == str8:
		n = r.be(1)
	case c == bin16 || c == str16:
		n = r.be(2)
	case c == bin32 || c == str32:
		n = r.be(4)
	case c >= fixStr && c <= fixStr|0x1f:
		n = uint64(c & 0x1f)
	default:
		r.Fail("%s: want %s, got byte 0x%02x", what, want, c)
		return nil
	}
	// take checks n against the input before anything is allocated.
	return r.take(int(n))
}

// Bytes reads a bin, str or nil and returns a copy of its bytes, nil when
// there are none.
func (r *Reader) Bytes(what string) []byte {
	p := r.raw(what, "bytes")
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// BinView reads a bin, or a nil (isNil), and returns its bytes without
// copying them: they alias the input. A str is refused.
func (r *Reader) BinView(what string) (b []byte, isNil bool) {
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return nil, false
	case c == nilByte:
		return nil, true
	case c == bin8:
		n = r.be(1)
	case c == bin16:
		n = r.be(2)
	case c == bin32:
		n = r.be(4)
	default:
		r.Fail("%s: want a bin, got byte 0x%02x", what, c)
		return nil, false
	}
	// take checks n against the input before anything is allocated.
	return r.take(int(n)), false
}

// Left is the number of bytes not read yet.
func (r *Reader) Left() int { return len(r.b) - r.off }

// Str reads a str, bin or nil (the empty string) as a string.
func (r *Reader) Str(what string) string {
	return string(r.raw(what, "a string"))
}

// containerLen reads an array or map header of the given fix form, 16- and
// 32-bit forms, or nil. It refuses more than limit elements, or more than
// the input left could hold at size bytes each.
func (r *Reader) containerLen(what, kind string, fix, b16, b32 byte, limit, size int) (n int, isNil bool) {
	c := r.byte1()
	var v uint64
	switch {
	case r.err != nil:
		return 0, false
	case c == nilByte:
		return 0, true
	case c >= fix && c <= fix|0x0f:
		v = uint64(c & 0x0f)
	case c == b16:
		v = r.be(2)
	case c == b32:
		v = r.be(4)
	default:
		r.Fail("%s: want %s, got byte 0x%02x", what, kind, c)
		return 0, false
	}
	switch left := len(r.b) - r.off; {
	case r.err != nil:
		return 0, false
	case v > uint64(limit):
		r.Fail("%s: %d elements exceeds the limit of %d", what, v, limit)
		return 0, false
	case v*uint64(size) > uint64(left):
		r.Fail("%s: %d elements cannot fit in the %d bytes left", what, v, left)
		return 0, false
	}
	return int(v), false
}

// ArrayLen reads an array header, or nil (isNil), and returns the number
// of elements, at most limit and at most what the input left can hold.
func (r *Reader) ArrayLen(what string, limit int) (n int, isNil bool) {
	return r.containerLen(what, "an array", fixArray, array16, array32, limit, 1)
}

// MapLen reads a map header, or nil (isNil), and returns the number of
// pairs, at most limit and at most what the input left can hold.
func (r *Reader) MapLen(what string, limit int) (n int, isNil bool) {
	return r.containerLen(what, "a map", fixMap, map16, map32, limit, 2)
}

// Fields reads a struct whose fields are named names (at most 64), calling
// f with the name of each field read, which f then reads. How the struct
// may appear is the Reader's mode: in Codec mode, f is not called for a
// field whose value is nil, which stands for the zero value, nor for a
// missing one.
func (r *Reader) Fields(what string, names []string, f func(name string)) {
	if r.mode == Codec && r.Nil() {
		return
	}
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return
	case c >= fixMap && c <= fixMap|0x0f:
		n = uint64(c & 0x0f)
	case c == map16:
		n = r.be(2)
	case c == map32:
		n = r.be(4)
	default:
		r.Fail("%s: want a map, got byte 0x%02x", what, c)
		return
	}
	switch {
	case r.err != nil:
		return
	case r.mode == Exact && n != uint64(len(names)):
		r.Fail("%s: map of %d fields, want %d", what, n, len(names))
		return
	case n > uint64(len(names)):
		// Every field once at most: more pairs than names cannot be read.
		r.Fail("%s: map of %d fields, the struct has %d", what, n, len(names))
		return
	}
	var seen uint64
	for range n {
		k := r.key(what)
		if r.err != nil {
			return
		}
		i := 0
		for i < len(names) && !nameIs(names[i], k) {
			i++
		}
		switch {
		case i == len(names):
			r.Fail("%s: unknown field %q", what, k)
			return
		case seen&(1<<i) != 0:
			r.Fail("%s: field %q repeated", what, k)
			return
		}
		seen |= 1 << i
		if r.mode == Codec && r.Nil() {
			continue
		}
		f(names[i])
		if r.err != nil {
			return
		}
	}
}

// nameIs reports whether k spells name; a byte loop, cheaper than string
// comparison for names of a letter or two.
func nameIs(name string, k []byte) bool {
	if len(name) != len(k) {
		return false
	}
	for j := range k {
		if name[j] != k[j] {
			return false
		}
	}
	return true
}

// key reads a field name: a fixstr or str8 in Exact mode, any str or bin in
// Codec mode.
func (r *Reader) key(what string) []byte {
	if r.mode == Codec {
		if r.err == nil && r.off < len(r.b) && r.b[r.off] == nilByte {
			r.Fail("%s: want a field name, got nil", what)
			return nil
		}
		return r.raw(what, "a field name")
	}
	c := r.byte1()
	var n int
	switch {
	case r.err != nil:
		return nil
	case c >= fixStr && c <= fixStr|0x1f:
		n = int(c & 0x1f)
	case c == str8:
		n = int(r.be(1))
	default:
		r.Fail("%s: want a field name, got byte 0x%02x", what, c)
		return nil
	}
	return r.take(n)
}
