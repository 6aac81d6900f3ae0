package wire_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// codecEntry is Entry as the reflective msgpack codec sees it; the hand
// written codec must agree with it byte for byte.
type codecEntry struct {
	I uint64      `codec:"i"`
	R edict.Stamp `codec:"r"`
	S edict.Stamp `codec:"s"`
	K uint8       `codec:"k"`
	D []byte      `codec:"d"`
}

func codecEncode(t testing.TB, e wire.Entry, writeExt bool) []byte {
	var out []byte
	h := &codec.MsgpackHandle{WriteExt: writeExt}
	require.NoError(t, codec.NewEncoderBytes(&out, h).Encode(codecEntry{e.Index, e.Reign, e.Stamp, uint8(e.Kind), e.Data}))
	return append([]byte{wire.EntryVersion}, out...)
}

func sampleEntries() []wire.Entry {
	big := wiretest.Stamp(math.MaxUint64, 1, math.MaxUint64)
	big.QT[0].T = edict.Time{Incarnation: math.MaxUint64, Nanos: math.MinInt64}
	big.QT[1].T.Nanos = -33
	big.QT[2].T.Nanos = math.MaxInt64
	wide := edict.Stamp{Epoch: 300, Counter: 70000}
	for p := 1; p <= 20; p++ { // more than a fixarray holds
		wide.QT = append(wide.QT, edict.Reading{Process: edict.ProcessID(p * 1000), T: edict.Time{Incarnation: uint64(p), Nanos: int64(p) * -200}})
	}
	return []wire.Entry{
		{Index: 1, Kind: wire.EntryConfig, Data: []byte("bootstrap")},
		{Index: 2, Reign: wiretest.Stamp(1, 1, 2), Stamp: wiretest.Stamp(1, 1, 2), Kind: wire.EntryReignStart},
		{Index: 128, Reign: wiretest.Stamp(2, 1, 2), Stamp: wiretest.Stamp(2, 1, 3), Kind: wire.EntryCommand, Data: bytes.Repeat([]byte{7}, 255)},
		{Index: 1 << 16, Reign: big, Stamp: wide, Kind: wire.EntryStop, Data: bytes.Repeat([]byte{1}, 256)},
		{Index: math.MaxUint64, Reign: wide, Stamp: big, Kind: wire.EntryCommand, Data: bytes.Repeat([]byte{2}, 70000)},
	}
}

func TestEntryRoundTripAndCodecAgreement(t *testing.T) {
	for _, e := range sampleEntries() {
		b, err := wire.EncodeEntry(e)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, e, true), b, "entry %d: hand encoding differs from the codec", e.Index)
		got, err := wire.DecodeEntry(b)
		require.NoError(t, err)
		require.Equal(t, e, got)
		// The codec's other form for bytes (raw strings) decodes too.
		got, err = wire.DecodeEntry(codecEncode(t, e, false))
		require.NoError(t, err)
		require.Equal(t, e, got)
		// And the codec reads ours.
		var ce codecEntry
		require.NoError(t, codec.NewDecoderBytes(b[1:], &codec.MsgpackHandle{}).Decode(&ce))
		require.Equal(t, e.Index, ce.I)
		require.True(t, e.Stamp.Equal(ce.S))
	}
}

func TestEntryDecodeDoesNotAlias(t *testing.T) {
	b, err := wire.EncodeEntry(wire.Entry{Index: 3, Kind: wire.EntryCommand, Data: []byte("abc")})
	require.NoError(t, err)
	e, err := wire.DecodeEntry(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0
	}
	require.Equal(t, "abc", string(e.Data))
}

func TestEntryDecodeRefuses(t *testing.T) {
	good, err := wire.EncodeEntry(sampleEntries()[2])
	require.NoError(t, err)
	mutate := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	// Byte offsets in good: [0] version, [1] map header 0x85, [2..3] "d".
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":          {nil, "empty input"},
		"version":        {mutate(func(b []byte) []byte { b[0] = 2; return b }), "unknown version byte 2"},
		"version zero":   {mutate(func(b []byte) []byte { b[0] = 0; return b }), "unknown version byte 0"},
		"trailing":       {append(bytes.Clone(good), 0), "1 trailing bytes"},
		"fields":         {mutate(func(b []byte) []byte { b[1] = 0x84; return b }), "map of 4 fields, want 5"},
		"unknown field":  {mutate(func(b []byte) []byte { b[3] = 'x'; return b }), `unknown field "x"`},
		"repeated field": {[]byte{wire.EntryVersion, 0x85, 0xa1, 'i', 1, 0xa1, 'i', 2}, `field "i" repeated`},
		"not a map":      {[]byte{wire.EntryVersion, 0x91, 0x01}, "want a map"},
		"too large":      {make([]byte, wire.MaxEntrySize+1), "exceeds the limit"},
	}
	// Unknown kind: re-encode through the codec with kind 9.
	e := sampleEntries()[2]
	e.Kind = 9
	cases["kind"] = struct {
		in   []byte
		want string
	}{codecEncode(t, e, true), "unknown kind 9"}
	e = sampleEntries()[2]
	e.Stamp.QT[0], e.Stamp.QT[1] = e.Stamp.QT[1], e.Stamp.QT[0]
	cases["unsorted qt"] = struct {
		in   []byte
		want string
	}{codecEncode(t, e, true), "not sorted"}
	for name, tc := range cases {
		_, err := wire.DecodeEntry(tc.in)
		require.ErrorContains(t, err, tc.want, name)
	}
	// Every proper prefix is an error, never a panic or a short entry.
	for n := 0; n < len(good); n++ {
		_, err := wire.DecodeEntry(good[:n])
		require.Error(t, err, "prefix of %d bytes", n)
	}
}

func TestEntryEncodeRefuses(t *testing.T) {
	_, err := wire.EncodeEntry(wire.Entry{Index: 1, Kind: 0})
	require.ErrorIs(t, err, wire.ErrInvalid)
	_, err = wire.EncodeEntry(wire.Entry{Index: 1, Kind: wire.EntryCommand, Stamp: edict.Stamp{Counter: 1}})
	require.ErrorIs(t, err, wire.ErrInvalid)
	_, err = wire.EncodeEntry(wire.Entry{Index: 1, Kind: wire.EntryCommand, Data: make([]byte, wire.MaxEntrySize)})
	require.ErrorIs(t, err, wire.ErrInvalid)
}

// FuzzDecodeEntry checks that DecodeEntry never panics, and that whatever it
// accepts encodes again and decodes to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range sampleEntries() {
		b, err := wire.EncodeEntry(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(codecEncode(f, e, false))
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{wire.EntryVersion})
	f.Add([]byte{wire.EntryVersion, 0x85, 0xa1, 'i', 0xcf, 0xff})
	f.Add([]byte{wire.EntryVersion, 0x85, 0xa1, 'd', 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{wire.EntryVersion, 0x85, 0xa1, 'r', 0x83, 0xa1, 'q', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := wire.DecodeEntry(in)
		if err != nil {
			return
		}
		b, err := wire.EncodeEntry(e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v (%+v)", err, e)
		}
		e2, err := wire.DecodeEntry(b)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if e.Index != e2.Index || e.Kind != e2.Kind || !e.Stamp.Equal(e2.Stamp) || !e.Reign.Equal(e2.Reign) || !bytes.Equal(e.Data, e2.Data) {
			t.Fatalf("round trip changed the entry: %+v → %+v", e, e2)
		}
	})
}
