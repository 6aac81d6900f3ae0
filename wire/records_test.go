package wire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/mpack"
	"github.com/edictlog/edictlog/mpack/mpacktest"
)

// The records were go-msgpack's until wire stopped importing it; the
// hand-written codecs must write the same bytes and read whatever it could
// have written. go-msgpack is the oracle here.

// codecEncode returns v as go-msgpack encodes it under h (the records'
// handle if nil), version byte first.
func codecEncode(t testing.TB, h *codec.MsgpackHandle, version byte, v any) []byte {
	b, err := mpacktest.Encode(h, v)
	require.NoError(t, err)
	return append([]byte{version}, b...)
}

// codecDecode decodes b as the go-msgpack decoders did (version byte, one
// value, no trailing bytes), without the structural checks.
func codecDecode(b []byte, version byte, v any) error {
	if len(b) == 0 || b[0] != version {
		return errors.New("no version byte")
	}
	return mpacktest.Decode(b[1:], v)
}

func canonical() *codec.MsgpackHandle {
	h := mpacktest.Handle()
	h.Canonical = true
	return h
}

// The raw readers decode without the structural checks, to compare layouts
// alone.

func rawEpochConfig(b []byte) (c EpochConfig, err error) {
	err = decodeRecord("epoch config", RecordVersion, MaxRecordSize, b, func(r *mpack.Reader) { c = readEpochConfig(r, "epoch config") })
	return c, err
}

func rawEpochRecord(b []byte) (rec EpochRecord, err error) {
	err = decodeRecord("epoch record", RecordVersion, MaxRecordSize, b, func(r *mpack.Reader) { rec = readEpochRecord(r) })
	return rec, err
}

func rawMembership(b []byte) (m Membership, err error) {
	err = decodeRecord("membership payload", MembershipVersion, MaxEntrySize, b, func(r *mpack.Reader) { m = readMembership(r) })
	return m, err
}

func ids(ps ...uint64) []edict.ProcessID {
	out := make([]edict.ProcessID, len(ps))
	for i, p := range ps {
		out[i] = edict.ProcessID(p)
	}
	return out
}

func span(first, n uint64) []edict.ProcessID {
	out := make([]edict.ProcessID, n)
	for i := range out {
		out[i] = edict.ProcessID(first + uint64(i))
	}
	return out
}

func edgeConfigs() []EpochConfig {
	stop := edict.Stamp{Epoch: math.MaxUint64, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: math.MaxUint64, Nanos: math.MinInt64}}, {Process: 300}}, Counter: 128}
	return []EpochConfig{
		{Members: ids(1)},
		{Epoch: 1, Members: ids(1, 2, 3)},
		{Epoch: 2, Members: ids(1, 2, 3), Learners: []edict.ProcessID{}},
		{Epoch: 127, Members: ids(2), Learners: ids(1, 3)},
		{Epoch: 128, Members: ids(1, 127, 128, 255, 256, math.MaxUint16+1, math.MaxUint32+1, math.MaxUint64)},
		{Epoch: math.MaxUint64, Members: span(1, 15), Learners: span(100, 16)},
		{Epoch: 9, Members: span(1, 1000), Learners: span(2000, 24)},
		{Epoch: 3, Members: ids(1, 2), Heard: true},
		{Epoch: 3, Members: ids(1, 2), StopIndex: 1},
		{Epoch: 3, Members: ids(1, 2), StopIndex: math.MaxUint64, StopStamp: stop},
		{Epoch: 3, Members: ids(1, 2), StopStamp: stop},
		{Epoch: 3, Members: ids(1, 2), Heard: true, StopIndex: 77, StopStamp: stop},
		{Epoch: 4, Members: ids(1, 2, 3), Retiring: 1},
		{Epoch: 4, Members: ids(1, 300), Learners: ids(7), Retiring: 300, StopIndex: 5, StopStamp: stop},
		// A zero stamp with an empty QT is empty to omitempty: left out.
		{Epoch: 3, Members: ids(1, 2), StopStamp: edict.Stamp{QT: edict.QT{}}},
	}
}

func edgeMemberships() []Membership {
	var ms []Membership
	for _, addrs := range []map[edict.ProcessID]string{
		nil,
		{},
		{1: ""},
		{1: "127.0.0.1:7001", 2: "127.0.0.1:7002", 3: "127.0.0.1:7003"},
		{math.MaxUint64: strings.Repeat("a", 31), 128: strings.Repeat("b", 32), 70000: strings.Repeat("c", 255),
			5: strings.Repeat("d", 256), 6: strings.Repeat("e", math.MaxUint16+1), 7: "ü"},
	} {
		for _, c := range edgeConfigs()[:4] {
			ms = append(ms, Membership{Config: c, Addrs: addrs})
		}
	}
	many := map[edict.ProcessID]string{}
	for p := range edict.ProcessID(40) {
		many[p*1000+1] = "host"
	}
	return append(ms, Membership{Config: edgeConfigs()[6], Addrs: many})
}

func edgeEpochRecords() []EpochRecord {
	var rs []EpochRecord
	for _, e := range []uint64{0, 1, 127, 128, math.MaxUint64} {
		for bits := range 8 {
			rs = append(rs, EpochRecord{Epoch: e, Wedged: bits&1 != 0, Terminated: bits&2 != 0, Runs: bits&4 != 0})
		}
	}
	return rs
}

func TestRecordsMatchCodec(t *testing.T) {
	for _, c := range edgeConfigs() {
		b, err := EncodeEpochConfig(c)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, nil, RecordVersion, c), b, "%+v", c)
		var want EpochConfig
		require.NoError(t, codecDecode(b, RecordVersion, &want))
		got, err := DecodeEpochConfig("k", b)
		require.NoError(t, err)
		require.Equal(t, want, got)
		if !c.StopStamp.IsZero() || c.StopStamp.QT == nil {
			require.Equal(t, c, got) // an omitted stop stamp reads as the zero one
		}
	}
	for _, r := range edgeEpochRecords() {
		b, err := EncodeEpochRecord(r)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, nil, RecordVersion, r), b, "%+v", r)
		got, err := DecodeEpochRecord("k", b)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	for _, m := range edgeMemberships() {
		b, err := EncodeMembership(m)
		require.NoError(t, err)
		require.Equal(t, codecEncode(t, canonical(), MembershipVersion, m), b, "%+v", m)
		got, err := DecodeMembership(b)
		require.NoError(t, err)
		require.Equal(t, m, got, "nil and empty lists and maps stay apart, as go-msgpack keeps them")
		// go-msgpack without Canonical wrote the addresses in map order.
		got, err = DecodeMembership(codecEncode(t, nil, MembershipVersion, m))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}

// TestRecordsMatchCodecRandom fills every field of each record at random,
// by reflection, so a field added to a record (EpochRecord is
// another package's) and not to its codec fails here.
func TestRecordsMatchCodecRandom(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(11, 12)), MaxLen: edict.MaxQTSize}
	for range 2000 {
		var c EpochConfig
		f.Fill(&c)
		b := appendEpochConfig([]byte{RecordVersion}, &c)
		require.Equal(t, codecEncode(t, nil, RecordVersion, c), b, "%+v", c)
		var want EpochConfig
		require.NoError(t, codecDecode(b, RecordVersion, &want))
		got, err := rawEpochConfig(b)
		require.NoError(t, err)
		require.Equal(t, want, got)

		var r EpochRecord
		f.Fill(&r)
		b = appendEpochRecord([]byte{RecordVersion}, &r)
		require.Equal(t, codecEncode(t, nil, RecordVersion, r), b, "%+v", r)
		gr, err := rawEpochRecord(b)
		require.NoError(t, err)
		require.Equal(t, r, gr)

		var m Membership
		f.Fill(&m)
		b = appendMembership([]byte{MembershipVersion}, &m)
		require.Equal(t, codecEncode(t, canonical(), MembershipVersion, m), b, "%+v", m)
		var wm Membership
		require.NoError(t, codecDecode(b, MembershipVersion, &wm))
		gm, err := rawMembership(b)
		require.NoError(t, err)
		require.Equal(t, wm, gm)
	}
}

// TestRecordsReadEveryCodecForm: whatever go-msgpack may have written for
// the records, with any handle option that changes its output, decodes to
// what go-msgpack itself decodes.
func TestRecordsReadEveryCodecForm(t *testing.T) {
	f := mpacktest.Filler{Rand: rand.New(rand.NewPCG(13, 14))}
	for name, h := range mpacktest.Encoders() {
		for range 300 {
			var c EpochConfig
			f.Fill(&c)
			b := codecEncode(t, h, RecordVersion, c)
			var want EpochConfig
			require.NoError(t, codecDecode(b, RecordVersion, &want))
			got, err := rawEpochConfig(b)
			require.NoError(t, err, "%s: % x", name, b)
			require.Equal(t, want, got, name)

			var r EpochRecord
			f.Fill(&r)
			b = codecEncode(t, h, RecordVersion, r)
			gr, err := rawEpochRecord(b)
			require.NoError(t, err, "%s: % x", name, b)
			require.Equal(t, r, gr, name)

			var m Membership
			f.Fill(&m)
			b = codecEncode(t, h, MembershipVersion, m)
			var wm Membership
			require.NoError(t, codecDecode(b, MembershipVersion, &wm))
			gm, err := rawMembership(b)
			require.NoError(t, err, "%s: % x", name, b)
			require.Equal(t, wm, gm, name)
		}
	}
	// Forms no handle writes today but the reflective decoder read: fields
	// in declaration order (as older encoders wrote them), fields missing
	// (a record from before a field existed), nil for a zero value.
	str := func(s string) []byte { return mpack.AppendStr(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	v := RecordVersion
	for _, in := range [][]byte{
		cat([]byte{v, 0x86}, str("e"), []byte{0x03}, str("m"), []byte{0x92, 0x01, 0x02}, str("l"), []byte{0x91, 0x05},
			str("h"), []byte{0xc3}, str("si"), []byte{0x09}, str("ss"), []byte{0x83, 0xa1, 'e', 0x01, 0xa1, 'q', 0x91, 0x82, 0xa1, 'p', 0x01, 0xa1, 't', 0x80, 0xa1, 'c', 0x02}),
		cat([]byte{v, 0x82}, str("e"), []byte{0x03}, str("m"), []byte{0x91, 0x01}),
		cat([]byte{v, 0x83}, str("m"), []byte{0x91, 0x01}, str("l"), []byte{0xc0}, str("ss"), []byte{0xc0}),
		cat([]byte{v, 0xde, 0x00, 0x01}, str("m"), []byte{0xdc, 0x00, 0x01, 0xd3, 0, 0, 0, 0, 0, 0, 0, 1}),
	} {
		var want EpochConfig
		require.NoError(t, codecDecode(in, v, &want), "% x", in)
		got, err := DecodeEpochConfig("k", in)
		require.NoError(t, err, "% x", in)
		require.Equal(t, want, got, "% x", in)
	}
	for _, in := range [][]byte{
		cat([]byte{v, 0x84}, str("w"), []byte{0xc3}, str("t"), []byte{0xc2}, str("e"), []byte{0x07}, str("r"), []byte{0xc3}),
		cat([]byte{v, 0x83}, str("e"), []byte{0x07}, str("w"), []byte{0xc3}, str("t"), []byte{0xc2}),
		cat([]byte{v, 0x81}, str("w"), []byte{0x01}),
		{v, 0x80},
		{v, 0xc0},
	} {
		var want EpochRecord
		require.NoError(t, codecDecode(in, v, &want), "% x", in)
		got, err := DecodeEpochRecord("k", in)
		require.NoError(t, err, "% x", in)
		require.Equal(t, want, got, "% x", in)
	}
	mv := MembershipVersion
	for _, in := range [][]byte{
		cat([]byte{mv, 0x82}, str("Config"), []byte{0x81, 0xa1, 'm', 0x91, 0x01}, str("Addrs"), []byte{0x82, 0x02, 0xa1, 'b', 0x01, 0xc4, 0x01, 'a'}),
		cat([]byte{mv, 0x81}, str("Config"), []byte{0x81, 0xa1, 'm', 0x91, 0x01}),
		cat([]byte{mv, 0x82}, str("Addrs"), []byte{0x81, 0x01, 0xc0}, str("Config"), []byte{0x81, 0xa1, 'm', 0x91, 0x01}),
	} {
		var want Membership
		require.NoError(t, codecDecode(in, mv, &want), "% x", in)
		got, err := DecodeMembership(in)
		require.NoError(t, err, "% x", in)
		require.Equal(t, want, got, "% x", in)
	}
}

func TestRecordDecodersRefuse(t *testing.T) {
	good, err := EncodeEpochConfig(EpochConfig{Epoch: 1, Members: ids(1, 2)})
	require.NoError(t, err)
	v := RecordVersion
	str := func(s string) []byte { return mpack.AppendStr(nil, s) }
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":             {nil, "empty record"},
		"version":           {append([]byte{9}, good[1:]...), "unknown version byte 9"},
		"too large":         {make([]byte, MaxRecordSize+1), "exceeds the limit"},
		"trailing":          {append(bytes.Clone(good), 0xc0), "1 trailing bytes"},
		"truncated":         {good[:len(good)-1], "2 elements cannot fit in the 1 bytes left"},
		"unknown field":     {append([]byte{v, 0x81}, append(str("x"), 0x01)...), `unknown field "x"`},
		"repeated field":    {append([]byte{v, 0x82}, append(append(str("e"), 0x01), append(str("e"), 0x01)...)...), `field "e" repeated`},
		"no members":        {[]byte{v, 0x80}, "no members"},
		"unsorted":          {codecEncode(t, nil, v, EpochConfig{Epoch: 1, Members: ids(2, 1)}), "not sorted"},
		"process 0":         {codecEncode(t, nil, v, EpochConfig{Epoch: 1, Members: ids(0, 1)}), "process 0"},
		"too many":          {codecEncode(t, nil, v, EpochConfig{Epoch: 1, Members: span(1, MaxConfigMembers+1)}), "exceeds the limit of 1024"},
		"retiring stranger": {codecEncode(t, nil, v, EpochConfig{Epoch: 1, Members: ids(1, 2), Learners: ids(3), Retiring: 3}), "retiring p3 is not a member"},
		"retiring alone":    {codecEncode(t, nil, v, EpochConfig{Epoch: 1, Members: ids(1), Retiring: 1}), "retiring p1 is the only member"},
		"as an array":       {[]byte{v, 0x91, 0x01}, "want a map"},
	}
	for name, c := range cases {
		_, err := DecodeEpochConfig("epochs/1/config", c.in)
		require.ErrorContains(t, err, c.want, name)
		require.ErrorContains(t, err, `stable key "epochs/1/config"`, name)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
	_, err = DecodeEpochRecord("w", []byte{v, 0x81, 0xa1, 'w', 0x02})
	require.ErrorContains(t, err, "want a boolean")
	require.ErrorIs(t, err, ErrCorrupt)

	mgood, err := EncodeMembership(Membership{Config: EpochConfig{Epoch: 1, Members: ids(1)}, Addrs: map[edict.ProcessID]string{1: "a"}})
	require.NoError(t, err)
	for name, c := range map[string]struct {
		in   []byte
		want string
	}{
		"version":        {append([]byte{9}, mgood[1:]...), "unknown version byte 9"},
		"trailing":       {append(bytes.Clone(mgood), 0x00), "1 trailing bytes"},
		"duplicate addr": {append([]byte{MembershipVersion, 0x81}, append(str("Addrs"), 0x82, 0x01, 0xa1, 'a', 0x01, 0xa1, 'b')...), "p1 listed twice"},
		"bad config":     {codecEncode(t, nil, MembershipVersion, Membership{}), "no members"},
		"huge addrs":     {append([]byte{MembershipVersion, 0x81}, append(str("Addrs"), 0xdf, 0x7f, 0xff, 0xff, 0xff)...), "cannot fit"},
	} {
		_, err := DecodeMembership(c.in)
		require.ErrorContains(t, err, c.want, name)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}

	_, err = EncodeEpochConfig(EpochConfig{Epoch: 1})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = EncodeMembership(Membership{Config: EpochConfig{Members: ids(2, 2)}})
	require.ErrorIs(t, err, ErrInvalid)
}

// agreeWithCodec fails t unless go-msgpack decodes in to want as well: the
// hand-written decoders accept nothing the reflective one refused, and
// read it the same.
func agreeWithCodec[T any](t *testing.T, in []byte, version byte, want T) {
	t.Helper()
	var got T
	if err := codecDecode(in, version, &got); err != nil {
		t.Fatalf("decoded % x to %+v, which go-msgpack refuses: %v", in, want, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded % x to %+v, go-msgpack to %+v", in, want, got)
	}
}
