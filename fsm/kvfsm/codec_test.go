package kvfsm

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleCommands() []Command {
	return []Command{
		{Put: &Put{Key: "k", Value: "v", PrevKV: true}},
		{Put: &Put{Key: "\x00\xff binary", Value: string([]byte{0, 1, 2, 0xff})}},
		{Delete: &Delete{Key: "a", RangeEnd: "\x00", PrevKV: true}},
		{Range: &Range{Key: "a", RangeEnd: "b", Limit: 3, CountOnly: true, KeysOnly: true}},
		CASValue("k", "old", "new"),
		CASIndex("k", 0, "new"),
		{Txn: &Txn{
			Compares: []Compare{
				{Key: "a", Target: TargetVersion, Op: Greater, Number: 1 << 40},
				{Key: "b", Target: TargetModRevision, Op: NotEqual},
			},
			Success: []Op{putOp("a", "1"), delOp("c", "d"), {Range: &Range{Key: "a", Limit: 1}}},
			Failure: []Op{getOp("a")},
		}},
		{Txn: &Txn{}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		b, err := EncodeCommand(c)
		require.NoError(t, err)
		assert.Equal(t, WireVersion, b[0])
		got, err := DecodeCommand(b)
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
}

func TestEncodeCommandRefusesInvalid(t *testing.T) {
	long := strings.Repeat("k", MaxKeySize+1)
	for name, c := range map[string]Command{
		"nothing set":          {},
		"two set":              {Put: &Put{Key: "a"}, Range: &Range{Key: "a"}},
		"put empty key":        {Put: &Put{Value: "v"}},
		"put long key":         {Put: &Put{Key: long}},
		"delete empty key":     {Delete: &Delete{RangeEnd: "\x00"}},
		"delete long end":      {Delete: &Delete{Key: "a", RangeEnd: long}},
		"range empty key":      {Range: &Range{}},
		"txn op with nothing":  {Txn: &Txn{Success: []Op{{}}}},
		"txn op with two":      {Txn: &Txn{Failure: []Op{{Put: &Put{Key: "a"}, Delete: &Delete{Key: "a"}}}}},
		"txn bad op":           {Txn: &Txn{Success: []Op{putOp("", "v")}}},
		"compare no target":    {Txn: &Txn{Compares: []Compare{{Key: "a", Op: Equal}}}},
		"compare bad target":   {Txn: &Txn{Compares: []Compare{{Key: "a", Target: 9, Op: Equal}}}},
		"compare no relation":  {Txn: &Txn{Compares: []Compare{{Key: "a", Target: TargetValue}}}},
		"compare bad relation": {Txn: &Txn{Compares: []Compare{{Key: "a", Target: TargetValue, Op: 7}}}},
		"compare empty key":    {Txn: &Txn{Compares: []Compare{{Target: TargetVersion, Op: Equal}}}},
		"value compare number": {Txn: &Txn{Compares: []Compare{{Key: "a", Target: TargetValue, Op: Equal, Number: 1}}}},
		"number compare value": {Txn: &Txn{Compares: []Compare{{Key: "a", Target: TargetVersion, Op: Equal, Value: "1"}}}},
		"too large":            {Put: &Put{Key: "a", Value: strings.Repeat("v", MaxCommandSize)}},
	} {
		_, err := EncodeCommand(c)
		assert.ErrorIsf(t, err, ErrInvalid, "%s", name)
		// Validate says the same, so the server can check before proposing.
		if name != "too large" {
			assert.ErrorIsf(t, c.Validate(), ErrInvalid, "%s", name)
		}
	}
	_, err := EncodeCommand(Command{Put: &Put{Key: "a", Value: strings.Repeat("v", MaxCommandSize-64)}})
	assert.NoError(t, err, "a value just under the command limit")
}

// rawMsgpack encodes v with the package's handle and a version byte, for
// inputs EncodeCommand would refuse to produce.
func rawMsgpack(t testing.TB, v any) []byte {
	t.Helper()
	var b []byte
	require.NoError(t, codec.NewEncoderBytes(&b, mh).Encode(v))
	return append([]byte{WireVersion}, b...)
}

func TestDecodeCommandRefusesBadInput(t *testing.T) {
	good, err := EncodeCommand(Command{Put: &Put{Key: "k", Value: "v"}})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, msg string
		b         []byte
	}{
		{"empty", "empty input", nil},
		{"version", "unknown version byte 2", append([]byte{2}, good[1:]...)},
		{"trailing", "1 trailing bytes", append(append([]byte{}, good...), 0xc0)},
		{"truncated", "EOF", good[:len(good)-1]},
		{"unknown field", "", rawMsgpack(t, map[string]any{"p": map[string]any{"k": "a", "zz": 1}})},
		{"unknown op", "", rawMsgpack(t, map[string]any{"x": map[string]any{"k": "a"}})},
		{"wrong type", "", rawMsgpack(t, map[string]any{"p": []int{1, 2}})},
		{"invalid after decode", "empty key", rawMsgpack(t, map[string]any{"p": map[string]any{"v": "x"}})},
		{"oversized", "exceeds the limit of 67108864", make([]byte, MaxCommandSize+1)},
		{"huge declared string", "", []byte{WireVersion, 0x81, 0xa1, 'p', 0x81, 0xa1, 'k', 0xdb, 0xff, 0xff, 0xff, 0xff}},
		{"huge declared array", "", []byte{WireVersion, 0x81, 0xa1, 't', 0x81, 0xa1, 'c', 0xdd, 0xff, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCommand(tc.b)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "fsm: decode command")
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestQueryAndResultRoundTrip(t *testing.T) {
	q, err := EncodeQuery(Range{Key: "a", RangeEnd: "\x00", Limit: 7, KeysOnly: true})
	require.NoError(t, err)
	r, err := DecodeQuery(q)
	require.NoError(t, err)
	assert.Equal(t, Range{Key: "a", RangeEnd: "\x00", Limit: 7, KeysOnly: true}, r)

	_, err = EncodeQuery(Range{})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = DecodeQuery(rawMsgpack(t, map[string]any{"e": "b"}))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = DecodeQuery(make([]byte, MaxQuerySize+1))
	assert.ErrorContains(t, err, "exceeds the limit")

	kv := KeyValue{Key: "a", Value: "b", CreateRevision: 1, ModRevision: 2, Version: 2, Stamp: stampAt(2)}
	for _, res := range []Result{
		{Revision: 9, Put: &PutResult{PrevKV: &kv}},
		{Revision: 9, Put: &PutResult{}},
		{Revision: 9, Delete: &DeleteResult{Deleted: 2, PrevKVs: []KeyValue{kv, kv}}},
		{Revision: 9, Range: &RangeResult{KVs: []KeyValue{kv}, Count: 5, More: true}},
		{Revision: 9, Txn: &TxnResult{Succeeded: true, Responses: []OpResult{{Range: &RangeResult{}}, {Put: &PutResult{}}}}},
	} {
		b, err := EncodeResult(&res)
		require.NoError(t, err)
		got, err := DecodeResult(b)
		require.NoError(t, err)
		assert.Equal(t, res, got)
	}
	badStamp := stampAt(1)
	badStamp.QT[1].Process = badStamp.QT[0].Process // a process twice
	for name, res := range map[string]Result{
		"nothing set": {Revision: 1},
		"two set":     {Put: &PutResult{}, Range: &RangeResult{}},
		"empty op":    {Txn: &TxnResult{Responses: []OpResult{{}}}},
		"bad stamp":   {Range: &RangeResult{KVs: []KeyValue{{Key: "a", Stamp: badStamp}}}},
	} {
		_, err := EncodeResult(&res)
		assert.ErrorIsf(t, err, ErrInvalid, "%s", name)
		_, err = DecodeResult(rawMsgpack(t, &res))
		assert.ErrorIsf(t, err, ErrInvalid, "%s", name)
	}
}

func TestQuery(t *testing.T) {
	h := fixture(t)
	for _, r := range []Range{
		{Key: "ab"},
		{Key: "zz"},
		{Key: "a", RangeEnd: "b", Limit: 2},
		{Key: "\x00", RangeEnd: "\x00", KeysOnly: true},
	} {
		q, err := EncodeQuery(r)
		require.NoError(t, err)
		b, err := h.kv.Query(q)
		require.NoError(t, err)
		got, err := DecodeResult(b)
		require.NoError(t, err)
		want, err := h.kv.Range(r)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := h.kv.Query([]byte{WireVersion, 0x80})
	assert.ErrorIs(t, err, ErrInvalid, "an empty Range has no key")
	_, err = h.kv.Query(nil)
	assert.ErrorIs(t, err, ErrInvalid)
}
