package mpack_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/mpack"
	"github.com/edictlog/edictlog/mpack/mpacktest"
)

// go-msgpack, with the handle the records were written with, is the
// oracle: every Append function writes its bytes, and a Reader reads what
// it writes under any handle option.

func codecEncode(t testing.TB, v any) []byte {
	b, err := mpacktest.Encode(nil, v)
	require.NoError(t, err)
	return b
}

func TestAppendMatchesCodec(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(5, 6))}
	uints := []uint64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxUint64}
	ints := []int64{0, 1, -1, -32, -33, 127, 128, -128, -129, math.MaxInt16, math.MaxInt16 + 1, math.MinInt16, math.MinInt16 - 1,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	for range 2000 {
		uints = append(uints, f.Uint())
		ints = append(ints, f.Int())
	}
	for _, v := range uints {
		require.Equal(t, codecEncode(t, v), mpack.AppendUint(nil, v), "uint %d", v)
	}
	for _, v := range ints {
		require.Equal(t, codecEncode(t, v), mpack.AppendInt(nil, v), "int %d", v)
	}
	for _, b := range []bool{false, true} {
		require.Equal(t, codecEncode(t, b), mpack.AppendBool(nil, b))
	}
	require.Equal(t, codecEncode(t, nil), mpack.AppendNil(nil))
	require.Equal(t, codecEncode(t, []byte(nil)), mpack.AppendBin(nil, nil))
	for _, n := range []int{0, 1, 15, 16, 31, 32, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		s := strings.Repeat("x", n)
		require.Equal(t, codecEncode(t, s), mpack.AppendStr(nil, s), "string of %d", n)
		require.Equal(t, codecEncode(t, []byte(s)), mpack.AppendBin(nil, []byte(s)), "bin of %d", n)
		// Headers: an array of n falses, a map of n distinct keys.
		arr := codecEncode(t, make([]bool, n))
		require.Equal(t, arr[:len(arr)-n], mpack.AppendArrayLen(nil, n), "array of %d", n)
		m := make(map[uint16]bool, n)
		for i := range n {
			m[uint16(i)] = false
		}
		h := mpacktest.Handle()
		h.Canonical = true
		enc, err := mpacktest.Encode(h, m)
		require.NoError(t, err)
		var body []byte
		for i := range n {
			body = mpack.AppendBool(mpack.AppendUint(body, uint64(i)), false)
		}
		require.Equal(t, enc, append(mpack.AppendMapLen(nil, n), body...), "map of %d", n)
	}
}

func TestReaderReadsEveryCodecForm(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(7, 8)), MaxLen: 300}
	for name, h := range mpacktest.Encoders() {
		for range 1000 {
			u, i, s, bs, ok := f.Uint(), f.Int(), strings.Repeat("y", f.Len()), bytes.Repeat([]byte{1}, f.Len()), f.Rand.IntN(2) == 0
			var b []byte
			for _, v := range []any{u, i, s, bs, ok, nil} {
				enc, err := mpacktest.Encode(h, v)
				require.NoError(t, err)
				b = append(b, enc...)
			}
			r := mpack.NewReader(b, 0, mpack.Codec)
			require.Equal(t, u, r.Uint("u"), name)
			require.Equal(t, i, r.Int("i"), name)
			require.Equal(t, s, r.Str("s"), name)
			if len(bs) == 0 {
				bs = nil
			}
			require.Equal(t, bs, r.Bytes("b"), name)
			require.Equal(t, ok, r.Bool("ok"), name)
			require.True(t, r.Nil(), name)
			r.End()
			require.NoError(t, r.Err(), name)
		}
	}
}

// BinView reads every bin form as go-msgpack wrote it, without copying,
// and a nil as nil; it refuses a str.
func TestBinView(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		b := bytes.Repeat([]byte{3}, n)
		enc := codecEncode(t, b)
		r := mpack.NewReader(enc, 0, mpack.Codec)
		got, isNil := r.BinView("b")
		r.End()
		require.NoError(t, r.Err(), "bin of %d", n)
		require.False(t, isNil)
		require.Equal(t, b, got, "bin of %d", n)
		if n > 0 {
			require.Same(t, &enc[len(enc)-n], &got[0], "the view aliases the input")
		}
		require.Equal(t, 0, r.Left())
	}
	r := mpack.NewReader([]byte{0xc0}, 0, mpack.Codec)
	got, isNil := r.BinView("b")
	require.True(t, isNil)
	require.Nil(t, got)
	r = mpack.NewReader(codecEncode(t, "str"), 0, mpack.Codec)
	r.BinView("b")
	require.ErrorContains(t, r.Err(), "b: want a bin, got byte 0xa3")
}

func TestReaderRefuses(t *testing.T) {
	cases := []struct {
		in   []byte
		read func(r *mpack.Reader)
		want string
	}{
		{[]byte{}, func(r *mpack.Reader) { r.Uint("u") }, "need 1 bytes, 0 left"},
		{[]byte{0xcf, 1}, func(r *mpack.Reader) { r.Uint("u") }, "need 8 bytes, 1 left"},
		{[]byte{0xe0}, func(r *mpack.Reader) { r.Uint("u") }, "u: want an unsigned integer, got byte 0xe0"},
		{[]byte{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, func(r *mpack.Reader) { r.Uint("u") }, "negative value"},
		{[]byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, func(r *mpack.Reader) { r.Int("i") }, "overflows int64"},
		{[]byte{0x02}, func(r *mpack.Reader) { r.Bool("b") }, "want a boolean"},
		{[]byte{0xc6, 0xff, 0xff, 0xff, 0xff}, func(r *mpack.Reader) { r.Bytes("d") }, "need 4294967295 bytes, 0 left"},
		{[]byte{0x91, 0x01}, func(r *mpack.Reader) { r.Str("s") }, "s: want a string, got byte 0x91"},
		{[]byte{0x92, 0x01}, func(r *mpack.Reader) { r.ArrayLen("a", 10) }, "a: 2 elements cannot fit in the 1 bytes left"},
		{[]byte{0x9f}, func(r *mpack.Reader) { r.ArrayLen("a", 10) }, "a: 15 elements exceeds the limit of 10"},
		{[]byte{0x81, 0x01}, func(r *mpack.Reader) { r.MapLen("m", 10) }, "m: 1 elements cannot fit in the 1 bytes left"},
		{[]byte{0x80, 0x00}, func(r *mpack.Reader) { r.MapLen("m", 10); r.End() }, "1 trailing bytes"},
	}
	for _, c := range cases {
		r := mpack.NewReader(c.in, 0, mpack.Codec)
		c.read(&r)
		require.ErrorContains(t, r.Err(), c.want, "% x", c.in)
		// The failure sticks: later reads are no-ops.
		require.Zero(t, r.Uint("again"))
		require.ErrorContains(t, r.Err(), c.want)
	}
}

func TestFieldsModes(t *testing.T) {
	names := []string{"a", "bb"}
	read := func(mode mpack.Mode, in []byte) (a, bb uint64, err error) {
		r := mpack.NewReader(in, 0, mode)
		r.Fields("s", names, func(name string) {
			switch name {
			case "a":
				a = r.Uint("a")
			case "bb":
				bb = r.Uint("bb")
			}
		})
		r.End()
		return a, bb, r.Err()
	}
	full := []byte{0x82, 0xa2, 'b', 'b', 0x02, 0xa1, 'a', 0x01}
	for _, mode := range []mpack.Mode{mpack.Exact, mpack.Codec} {
		a, bb, err := read(mode, full)
		require.NoError(t, err)
		require.Equal(t, [2]uint64{1, 2}, [2]uint64{a, bb})
	}
	for _, in := range [][]byte{
		{0xc0},
		{0x80},
		{0x81, 0xa1, 'a', 0xc0},
		{0x81, 0xc4, 0x02, 'b', 'b', 0x05},
		{0x81, 0xdb, 0, 0, 0, 0x02, 'b', 'b', 0x05},
	} {
		_, _, err := read(mpack.Codec, in)
		require.NoError(t, err, "% x", in)
		_, _, err = read(mpack.Exact, in)
		require.Error(t, err, "% x", in)
	}
	_, _, err := read(mpack.Exact, []byte{0x81, 0xa1, 'a', 0x01})
	require.ErrorContains(t, err, "map of 1 fields, want 2")
	_, _, err = read(mpack.Codec, []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x01})
	require.ErrorContains(t, err, `field "a" repeated`)
	_, _, err = read(mpack.Codec, []byte{0x81, 0xa1, 'c', 0x01})
	require.ErrorContains(t, err, `unknown field "c"`)
	_, _, err = read(mpack.Codec, []byte{0x92, 0x01, 0x02})
	require.ErrorContains(t, err, "want a map")
}

// FuzzReadValue reads one value of the kind op names from arbitrary bytes:
// never a panic, and whatever reads without error go-msgpack reads to the
// same value from the bytes consumed.
func FuzzReadValue(f *testing.F) {
	for _, v := range []any{uint64(300), int64(-40000), "name", []byte{1, 2}, true, nil} {
		b, _ := mpacktest.Encode(nil, v)
		for op := range 8 {
			f.Add(b, uint8(op))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, op uint8) {
		r := mpack.NewReader(b, 0, mpack.Codec)
		agree := func(got any, into any) {
			if r.Err() != nil {
				return
			}
			if err := mpacktest.Decode(b[:r.Offset()], into); err != nil {
				t.Fatalf("read % x as %#v; go-msgpack refuses it: %v", b[:r.Offset()], got, err)
			}
		}
		switch op % 8 {
		case 0:
			v := r.Uint("u")
			var w uint64
			if agree(v, &w); r.Err() == nil && w != v {
				t.Fatalf("% x: %d, go-msgpack %d", b, v, w)
			}
		case 1:
			v := r.Int("i")
			var w int64
			if agree(v, &w); r.Err() == nil && w != v {
				t.Fatalf("% x: %d, go-msgpack %d", b, v, w)
			}
		case 2:
			v := r.Str("s")
			var w string
			if agree(v, &w); r.Err() == nil && w != v {
				t.Fatalf("% x: %q, go-msgpack %q", b, v, w)
			}
		case 3:
			v := r.Bytes("b")
			var w []byte
			if agree(v, &w); r.Err() == nil && !bytes.Equal(w, v) {
				t.Fatalf("% x: %x, go-msgpack %x", b, v, w)
			}
		case 4:
			v := r.Bool("ok")
			var w bool
			if agree(v, &w); r.Err() == nil && w != v {
				t.Fatalf("% x: %v, go-msgpack %v", b, v, w)
			}
		case 5:
			n, _ := r.ArrayLen("a", 1000)
			for range n {
				r.Uint("e")
			}
		case 6, 7:
			mode := mpack.Mode(op % 8 & 1)
			r = mpack.NewReader(b, 0, mode)
			r.Fields("s", []string{"a", "bb", "ccc"}, func(name string) {
				switch name {
				case "a":
					r.Int("a")
				case "bb":
					r.Str("bb")
				case "ccc":
					n, _ := r.MapLen("ccc", 100)
					for range n {
						r.Uint("k")
						r.Bool("v")
					}
				}
			})
		}
		if off := r.Offset(); off < 0 || off > len(b) {
			t.Fatalf("offset %d out of the input's %d bytes", off, len(b))
		}
	})
}
