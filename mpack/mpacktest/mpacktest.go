// Package mpacktest holds what the tests of the hand-written record codecs
// (edict, wire) share: go-msgpack with the handle the records were written
// with, as the oracle the codecs must agree with byte for byte, and a
// random filler that reaches every field of a type by reflection, so that
// a field added to a record and not to its codec fails the comparison.
package mpacktest

import (
	"math"
	"math/rand/v2"
	"reflect"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Handle returns the handle edictlog's records were written and read with
// while they used go-msgpack: WriteExt (bin for []byte, str8 for strings),
// ErrorIfNoField, MaxInitLen 64. Set Canonical to sort map keys, which the
// hand-written encoders always do.
func Handle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}

// Encode returns go-msgpack's encoding of v under h (Handle if nil).
func Encode(h *codec.MsgpackHandle, v any) ([]byte, error) {
	if h == nil {
		h = Handle()
	}
	var b []byte
	err := codec.NewEncoderBytes(&b, h).Encode(v)
	return b, err
}

// Decode decodes b into v as the records' go-msgpack decoders did: exactly
// one value, no trailing bytes.
func Decode(b []byte, v any) error {
	d := codec.NewDecoderBytes(b, Handle())
	if err := d.Decode(v); err != nil {
		return err
	}
	if n := d.NumBytesRead(); n != len(b) {
		return errTrailing
	}
	return nil
}

type trailing struct{}

func (trailing) Error() string { return "trailing bytes" }

var errTrailing error = trailing{}

// Encoders returns go-msgpack handles with every option that changes what
// it writes for the records' types: the records' own, without WriteExt
// (strings without str8), with fixints written long, with non-negative
// signed integers written as unsigned, with sorted map keys. A record's
// decoder reads what any of them writes.
func Encoders() map[string]*codec.MsgpackHandle {
	hs := map[string]*codec.MsgpackHandle{}
	for _, name := range []string{"records", "no WriteExt", "NoFixedNum", "PositiveIntUnsigned", "Canonical"} {
		h := Handle()
		switch name {
		case "no WriteExt":
			h.WriteExt = false
		case "NoFixedNum":
			h.NoFixedNum = true
		case "PositiveIntUnsigned":
			h.PositiveIntUnsigned = true
		case "Canonical":
			h.Canonical = true
		}
		hs[name] = h
	}
	return hs
}

// Filler sets values at random, favouring the edges of each encoding:
// integers at the boundaries between msgpack's forms, nil and empty slices
// and maps, strings and slices around the fixed-size forms' limits.
type Filler struct {
	Rand *rand.Rand
	// MaxLen bounds slices, maps and strings (default 40); lengths near it
	// are drawn rarely.
	MaxLen int
}

// Fill sets every exported field reachable from ptr, a pointer.
func (f *Filler) Fill(ptr any) {
	f.fill(reflect.ValueOf(ptr).Elem())
}

var uintEdges = []uint64{0, 1, 31, 32, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1,
	math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}

var intEdges = []int64{0, 1, -1, -31, -32, -33, 127, 128, -128, -129, math.MaxInt16, math.MaxInt16 + 1,
	math.MinInt16, math.MinInt16 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
	math.MaxInt64, math.MinInt64}

// Uint returns an unsigned integer: an edge, or random with a random
// number of bits.
func (f *Filler) Uint() uint64 {
	if f.Rand.IntN(2) == 0 {
		return uintEdges[f.Rand.IntN(len(uintEdges))]
	}
	return f.Rand.Uint64() >> f.Rand.IntN(64)
}

// Int returns a signed integer: an edge, or random with a random number
// of bits and sign.
func (f *Filler) Int() int64 {
	if f.Rand.IntN(2) == 0 {
		return intEdges[f.Rand.IntN(len(intEdges))]
	}
	v := int64(f.Rand.Uint64() >> (1 + f.Rand.IntN(63)))
	if f.Rand.IntN(2) == 0 {
		v = -v - 1
	}
	return v
}

// Len returns a length: mostly small, sometimes at a fixed form's limit,
// rarely up to MaxLen.
func (f *Filler) Len() int {
	maxLen := f.MaxLen
	if maxLen == 0 {
		maxLen = 40
	}
	var n int
	switch f.Rand.IntN(8) {
	case 0:
		n = []int{15, 16, 31, 32, 255, 256}[f.Rand.IntN(6)]
	case 1:
		n = f.Rand.IntN(maxLen + 1)
	default:
		n = 1 + f.Rand.IntN(5)
	}
	return min(n, maxLen)
}

func (f *Filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(f.Rand.IntN(2) == 0)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(f.Uint() & (math.MaxUint64 >> (64 - v.Type().Bits())))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := f.Int()
		if bits := v.Type().Bits(); bits < 64 {
			x = x << (64 - bits) >> (64 - bits)
		}
		v.SetInt(x)
	case reflect.String:
		b := make([]byte, f.Len())
		for i := range b {
			b[i] = byte('a' + f.Rand.IntN(26))
		}
		v.SetString(string(b))
	case reflect.Slice:
		switch f.Rand.IntN(4) {
		case 0: // nil
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := f.Len()
			s := reflect.MakeSlice(v.Type(), n, n)
			if s.Len() == 0 {
				s = reflect.MakeSlice(v.Type(), 1, 1)
			}
			for i := range s.Len() {
				f.fill(s.Index(i))
			}
			v.Set(s)
		}
	case reflect.Map:
		switch f.Rand.IntN(4) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			m := reflect.MakeMap(v.Type())
			for range max(1, f.Len()) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				f.fill(k)
				f.fill(e)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i))
		}
	case reflect.Pointer, reflect.Interface:
		v.SetZero()
	default:
		panic("mpacktest: cannot fill a " + v.Type().String())
	}
	// Zero a sixth of the values once more, so omitempty fields are often
	// left out.
	if v.CanSet() && v.Kind() != reflect.Struct && f.Rand.IntN(6) == 0 {
		v.SetZero()
	}
}
