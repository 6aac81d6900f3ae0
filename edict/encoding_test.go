package edict

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/mpack"
	"github.com/edictlog/edictlog/mpack/mpacktest"
)

// The encodings were go-msgpack's until edict stopped importing it; the
// hand-written codec must write the same bytes and read what it wrote.
// go-msgpack is the oracle here.

// codecEncode returns v as go-msgpack encodes it, version byte first.
func codecEncode(t testing.TB, v any) []byte {
	b, err := mpacktest.Encode(nil, v)
	require.NoError(t, err)
	return append([]byte{WireVersion}, b...)
}

// codecDecode decodes b as the go-msgpack decoders did (version byte, one
// value, no trailing bytes), without the structural checks.
func codecDecode(b []byte, v any) error {
	if len(b) == 0 || b[0] != WireVersion {
		return errors.New("no version byte")
	}
	return mpacktest.Decode(b[1:], v)
}

// rawStamp decodes a stamp without WellFormed, to compare layouts alone.
func rawStamp(b []byte) (Stamp, error) {
	var s Stamp
	err := decode("stamp", b, func(r *mpack.Reader) { s = ReadStampMsgpack(r, "stamp") })
	return s, err
}

func edgeTimes() []Time {
	var ts []Time
	for _, n := range []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, math.MaxInt16, math.MaxInt16 + 1,
		math.MinInt16, math.MinInt16 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
		math.MaxInt64, math.MinInt64} {
		for _, i := range []uint64{0, 127, 128, 255, 256, math.MaxUint16 + 1, math.MaxUint32 + 1, math.MaxUint64} {
			ts = append(ts, Time{Incarnation: i, Nanos: n})
		}
	}
	return ts
}

func edgeQTs() []QT {
	one := QT{{Process: 1, T: Time{Incarnation: 1, Nanos: -5}}}
	var qts []QT
	for _, n := range []int{1, 2, 15, 16, 17, MaxQTSize} {
		qt := make(QT, n)
		for i := range qt {
			qt[i] = Reading{Process: ProcessID(uint64(i+1) << (i / 5)), T: Time{Incarnation: uint64(i), Nanos: int64(i) * -1000}}
		}
		qts = append(qts, qt)
	}
	return append(qts, one, QT{{Process: math.MaxUint64, T: Time{Incarnation: math.MaxUint64, Nanos: math.MinInt64}}})
}

func edgeStamps() []Stamp {
	ss := []Stamp{{}, {QT: QT{}}}
	for _, qt := range edgeQTs() {
		for _, v := range []uint64{0, 1, 128, math.MaxUint32, math.MaxUint64} {
			ss = append(ss, Stamp{Epoch: v, QT: qt, Counter: math.MaxUint64 - v})
		}
	}
	return ss
}

func TestEncodingMatchesCodec(t *testing.T) {
	for _, tt := range edgeTimes() {
		b, err := EncodeTime(tt)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, tt), b, "time %v", tt)
		got, err := DecodeTime(b)
		require.NoError(t, err)
		require.Equal(t, tt, got)
	}
	for _, qt := range edgeQTs() {
		b, err := EncodeQT(qt)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, []Reading(qt)), b, "QT %v", qt)
		got, err := DecodeQT(b)
		require.NoError(t, err)
		require.Equal(t, qt, got)
	}
	for _, s := range edgeStamps() {
		b, err := EncodeStamp(s)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, s), b, "stamp %v", s)
		got, err := DecodeStamp(b)
		require.NoError(t, err)
		require.Equal(t, s, got, "nil and empty QTs stay apart, as go-msgpack keeps them")
	}
	// Malformed stamps are refused by EncodeStamp but embedded ones are
	// written as they are: the layout alone agrees too.
	for _, s := range []Stamp{{Epoch: 3, Counter: 1}, {Epoch: 3, QT: QT{}, Counter: 1}, {QT: QT{{}, {}}}} {
		b := AppendStampMsgpack([]byte{WireVersion}, &s)
		require.Equal(t, codecEncode(t, s), b, "stamp %#v", s)
		got, err := rawStamp(b)
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
}

func TestEncodingMatchesCodecRandom(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(1, 2)), MaxLen: MaxQTSize}
	for range 3000 {
		var s Stamp
		f.Fill(&s)
		b := AppendStampMsgpack([]byte{WireVersion}, &s)
		require.Equal(t, codecEncode(t, s), b, "stamp %#v", s)
		got, err := rawStamp(b)
		require.NoError(t, err)
		require.Equal(t, s, got)
		if s.WellFormed() == nil {
			enc, err := EncodeStamp(s)
			require.NoError(t, err)
			require.Equal(t, b, enc)
		}

		var tt Time
		f.Fill(&tt)
		b, err = EncodeTime(tt)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, tt), b, "time %#v", tt)
		gt, err := DecodeTime(b)
		require.NoError(t, err)
		require.Equal(t, tt, gt)
	}
}

// TestDecodeReadsEveryCodecForm: whatever go-msgpack may have written for
// these types, with any handle option that changes its output, decodes to
// what go-msgpack itself decodes.
func TestDecodeReadsEveryCodecForm(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(3, 4)), MaxLen: 40}
	for name, h := range mpacktest.Encoders() {
		for range 500 {
			var s Stamp
			f.Fill(&s)
			body, err := mpacktest.Encode(h, s)
			require.NoError(t, err)
			b := append([]byte{WireVersion}, body...)
			var want Stamp
			require.NoError(t, codecDecode(b, &want), name)
			got, err := rawStamp(b)
			require.NoError(t, err, "%s: % x", name, b)
			require.Equal(t, want, got, name)
		}
	}
	// Forms no handle writes today but the reflective decoder read: fields
	// in any order or missing, nil for a zero value, names as str8, str16
	// or bin, integers in longer or other-signed forms, maps as map16.
	v := WireVersion
	for _, in := range [][]byte{
		{v, 0x82, 0xa1, 'n', 0x05, 0xa1, 'i', 0x03},
		{v, 0x81, 0xa1, 'n', 0x05},
		{v, 0x80},
		{v, 0xc0},
		{v, 0x82, 0xa1, 'i', 0xc0, 0xa1, 'n', 0xc0},
		{v, 0x81, 0xd9, 0x01, 'i', 0x07},
		{v, 0x81, 0xda, 0x00, 0x01, 'i', 0x07},
		{v, 0x81, 0xc4, 0x01, 'i', 0x07},
		{v, 0x81, 0xa1, 'i', 0xd3, 0, 0, 0, 0, 0, 0, 0, 7},
		{v, 0x81, 0xa1, 'i', 0xcc, 0x07},
		{v, 0x81, 0xa1, 'n', 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{v, 0x81, 0xa1, 'n', 0xd0, 0x05},
		{v, 0xde, 0x00, 0x01, 0xa1, 'i', 0x07},
		{v, 0xdf, 0x00, 0x00, 0x00, 0x01, 0xa1, 'i', 0x07},
	} {
		var want Time
		require.NoError(t, codecDecode(in, &want), "% x", in)
		got, err := DecodeTime(in)
		require.NoError(t, err, "% x", in)
		require.Equal(t, want, got, "% x", in)
	}
	for _, in := range [][]byte{
		{v, 0x83, 0xa1, 'q', 0x91, 0x82, 0xa1, 't', 0x81, 0xa1, 'n', 0x01, 0xa1, 'p', 0x02, 0xa1, 'e', 0x01, 0xa1, 'c', 0x00},
		{v, 0x82, 0xa1, 'e', 0x01, 0xa1, 'q', 0xdc, 0x00, 0x01, 0x81, 0xa1, 'p', 0x02},
		{v, 0x81, 0xa1, 'q', 0xdd, 0x00, 0x00, 0x00, 0x01, 0x81, 0xa1, 'p', 0x02},
		{v, 0x81, 0xa1, 'q', 0x90},
		{v, 0x81, 0xa1, 'q', 0xc0},
	} {
		var want Stamp
		require.NoError(t, codecDecode(in, &want), "% x", in)
		got, err := rawStamp(in)
		require.NoError(t, err, "% x", in)
		require.Equal(t, want, got, "% x", in)
	}
}

// TestDecodeRefusesWhatNoEncoderWrites: a few forms go-msgpack's decoder
// took but no encoder writes are refused (the documented exceptions of
// mpack.Codec), and so is everything it refused.
func TestDecodeRefusesWhatNoEncoderWrites(t *testing.T) {
	v := WireVersion
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"repeated field":   {[]byte{v, 0x82, 0xa1, 'i', 0x01, 0xa1, 'i', 0x02}, `field "i" repeated`},
		"struct as array":  {[]byte{v, 0x92, 0x01, 0x02}, "want a map"},
		"nanos overflow":   {[]byte{v, 0x81, 0xa1, 'n', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, "overflows int64"},
		"unknown field":    {[]byte{v, 0x81, 0xa1, 'x', 0x01}, `unknown field "x"`},
		"case matters":     {[]byte{v, 0x81, 0xa1, 'I', 0x01}, `unknown field "I"`},
		"nil name":         {[]byte{v, 0x81, 0xc0, 0x01}, "want a field name"},
		"negative":         {[]byte{v, 0x81, 0xa1, 'i', 0xff}, "want an unsigned integer"},
		"negative signed":  {[]byte{v, 0x81, 0xa1, 'i', 0xd0, 0xff}, "negative value -1"},
		"float":            {[]byte{v, 0x81, 0xa1, 'i', 0xca, 0, 0, 0, 0}, "want an unsigned integer"},
		"too many fields":  {[]byte{v, 0x83, 0xa1, 'i', 0x01, 0xa1, 'n', 0x01, 0xa1, 'x', 0x01}, "map of 3 fields, the struct has 2"},
		"truncated":        {[]byte{v, 0x82, 0xa1, 'i', 0x01}, "need 1 bytes, 0 left"},
		"trailing":         {[]byte{v, 0x80, 0x80}, "1 trailing bytes"},
		"huge map":         {[]byte{v, 0xdf, 0xff, 0xff, 0xff, 0xff}, "map of 4294967295 fields"},
		"name as an array": {[]byte{v, 0x81, 0x91, 'i', 0x01}, "want a field name"},
	}
	for name, c := range cases {
		_, err := DecodeTime(c.in)
		assert.ErrorContains(t, err, c.want, name)
		assert.ErrorContains(t, err, "edict: decode time", name)
	}
	_, err := DecodeQT([]byte{v, 0xdd, 0xff, 0xff, 0xff, 0xff})
	assert.ErrorContains(t, err, "exceeds the limit of 255")
	_, err = DecodeQT([]byte{v, 0xdc, 0x00, 0x10, 0x80})
	assert.ErrorContains(t, err, "16 elements cannot fit in the 1 bytes left")
}

// agreeWithCodec fails t unless go-msgpack decodes in to want as well: the
// hand-written decoders accept nothing the reflective one refused, and
// read it the same.
func agreeWithCodec[T any](t *testing.T, in []byte, want T) {
	t.Helper()
	var got T
	if err := codecDecode(in, &got); err != nil {
		t.Fatalf("decoded % x to %#v, which go-msgpack refuses: %v", in, want, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded % x to %#v, go-msgpack to %#v", in, want, got)
	}
}

func TestAppendStampMsgpackAppends(t *testing.T) {
	s := Stamp{Epoch: 1, QT: QT{{Process: 1}}, Counter: 2}
	prefix := []byte("prefix")
	b := AppendStampMsgpack(bytes.Clone(prefix), &s)
	require.True(t, bytes.HasPrefix(b, prefix))
	require.Equal(t, codecEncode(t, s)[1:], b[len(prefix):])
}
