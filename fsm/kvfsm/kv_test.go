package kvfsm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPutRevisionsVersionsAndPrevKV(t *testing.T) {
	h := newHarness(t)

	r := h.do(Command{Put: &Put{Key: "a", Value: "1", PrevKV: true}})
	assert.Nil(t, r.Put.PrevKV, "a new key has no previous state")
	kv, ok := h.kv.Get("a")
	require.True(t, ok)
	assert.Equal(t, KeyValue{Key: "a", Value: "1", CreateRevision: 1, ModRevision: 1, Version: 1, Stamp: stampAt(1)}, kv)

	h.raw(nil) // index 2: a log no-op
	r = h.do(Command{Put: &Put{Key: "a", Value: "2", PrevKV: true}})
	require.NotNil(t, r.Put.PrevKV)
	assert.Equal(t, KeyValue{Key: "a", Value: "1", CreateRevision: 1, ModRevision: 1, Version: 1, Stamp: stampAt(1)}, *r.Put.PrevKV)
	kv, _ = h.kv.Get("a")
	assert.Equal(t, KeyValue{Key: "a", Value: "2", CreateRevision: 1, ModRevision: 3, Version: 2, Stamp: stampAt(3)}, kv)

	r = h.put("a", "3")
	assert.Nil(t, r.Put.PrevKV, "PrevKV not asked for")

	h.do(Command{Delete: &Delete{Key: "a"}})
	_, ok = h.kv.Get("a")
	assert.False(t, ok)

	h.put("a", "again")
	kv, _ = h.kv.Get("a")
	assert.Equal(t, KeyValue{Key: "a", Value: "again", CreateRevision: 6, ModRevision: 6, Version: 1, Stamp: stampAt(6)}, kv,
		"a re-created key starts a new life at version 1")
	assert.Equal(t, uint64(6), h.kv.Revision())

	// An empty value is a value.
	h.put("empty", "")
	kv, ok = h.kv.Get("empty")
	require.True(t, ok)
	assert.Equal(t, "", kv.Value)
}

// rangeFixture holds keys chosen to sit on the edges of etcd's range
// conventions.
var rangeFixture = []string{"a", "ab", "abc", "abd", "ac", "b", "b\xff", "c", "\xff", "\xff\xff"}

func fixture(t *testing.T) *harness {
	h := newHarness(t)
	for _, k := range rangeFixture {
		h.put(k, "v-"+k)
	}
	return h
}

func TestRange(t *testing.T) {
	h := fixture(t)
	all := rangeFixture
	for _, tc := range []struct {
		name  string
		r     Range
		keys  []string
		count uint64
		more  bool
	}{
		{"single key", Range{Key: "ab"}, []string{"ab"}, 1, false},
		{"missing key", Range{Key: "aa"}, []string{}, 0, false},
		{"half-open range", Range{Key: "a", RangeEnd: "b"}, []string{"a", "ab", "abc", "abd", "ac"}, 5, false},
		{"range end excluded", Range{Key: "ab", RangeEnd: "ac"}, []string{"ab", "abc", "abd"}, 3, false},
		{"prefix", Range{Key: "ab", RangeEnd: PrefixEnd("ab")}, []string{"ab", "abc", "abd"}, 3, false},
		{"prefix ending in 0xff", Range{Key: "b\xff", RangeEnd: PrefixEnd("b\xff")}, []string{"b\xff"}, 1, false},
		{"prefix of 0xff only is every key from it", Range{Key: "\xff", RangeEnd: PrefixEnd("\xff")}, []string{"\xff", "\xff\xff"}, 2, false},
		{"from key to the end", Range{Key: "b", RangeEnd: "\x00"}, []string{"b", "b\xff", "c", "\xff", "\xff\xff"}, 5, false},
		{"every key", Range{Key: "\x00", RangeEnd: "\x00"}, all, uint64(len(all)), false},
		{"end before key", Range{Key: "c", RangeEnd: "b"}, []string{}, 0, false},
		{"end equal to key", Range{Key: "b", RangeEnd: "b"}, []string{}, 0, false},
		{"limit", Range{Key: "a", RangeEnd: "b", Limit: 2}, []string{"a", "ab"}, 5, true},
		{"limit equal to count", Range{Key: "a", RangeEnd: "b", Limit: 5}, []string{"a", "ab", "abc", "abd", "ac"}, 5, false},
		{"limit above count", Range{Key: "a", RangeEnd: "b", Limit: 50}, []string{"a", "ab", "abc", "abd", "ac"}, 5, false},
		{"count only", Range{Key: "a", RangeEnd: "b", CountOnly: true}, []string{}, 5, false},
		{"count only ignores limit", Range{Key: "a", RangeEnd: "b", CountOnly: true, Limit: 1}, []string{}, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.kv.Range(tc.r)
			require.NoError(t, err)
			assert.Equal(t, h.idx, res.Revision)
			require.NotNil(t, res.Range)
			assert.Equal(t, tc.keys, keysOf(res.Range.KVs))
			assert.Equal(t, tc.count, res.Range.Count)
			assert.Equal(t, tc.more, res.Range.More)
			for _, kv := range res.Range.KVs {
				assert.Equal(t, "v-"+kv.Key, kv.Value)
			}
		})
	}
}

func TestRangeKeysOnly(t *testing.T) {
	h := fixture(t)
	res, err := h.kv.Range(Range{Key: "ab", RangeEnd: PrefixEnd("ab"), KeysOnly: true})
	require.NoError(t, err)
	require.Len(t, res.Range.KVs, 3)
	for _, kv := range res.Range.KVs {
		assert.Empty(t, kv.Value)
		full, _ := h.kv.Get(kv.Key)
		full.Value = ""
		assert.Equal(t, full, kv, "keys-only keeps everything but the value")
	}
}

func TestRangeRefusesInvalid(t *testing.T) {
	kv := NewKV()
	for _, r := range []Range{
		{},
		{RangeEnd: "b"},
		{Key: strings.Repeat("k", MaxKeySize+1)},
		{Key: "a", RangeEnd: strings.Repeat("k", MaxKeySize+1)},
	} {
		_, err := kv.Range(r)
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, err := kv.Range(Range{Key: strings.Repeat("k", MaxKeySize)})
	assert.NoError(t, err, "a key of exactly MaxKeySize is allowed")
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{
		"a":          "b",
		"ab":         "ac",
		"a\xff":      "b",
		"a\xfe\xff":  "a\xff",
		"\xff":       "\x00",
		"\xff\xff":   "\x00",
		"":           "\x00",
		"key/prefix": "key/prefiy",
	} {
		assert.Equalf(t, want, PrefixEnd(in), "PrefixEnd(%q)", in)
	}
}

func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Delete
		gone []string
	}{
		{"single key", Delete{Key: "ab"}, []string{"ab"}},
		{"missing key", Delete{Key: "aa"}, []string{}},
		{"range", Delete{Key: "ab", RangeEnd: "b"}, []string{"ab", "abc", "abd", "ac"}},
		{"prefix", Delete{Key: "ab", RangeEnd: PrefixEnd("ab")}, []string{"ab", "abc", "abd"}},
		{"from key to the end", Delete{Key: "c", RangeEnd: "\x00"}, []string{"c", "\xff", "\xff\xff"}},
		{"every key", Delete{Key: "\x00", RangeEnd: "\x00"}, rangeFixture},
		{"end before key", Delete{Key: "c", RangeEnd: "a"}, []string{}},
	} {
		for _, prev := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				h := fixture(t)
				before, _ := state(t, h.kv)
				d := tc.d
				d.PrevKV = prev
				r := h.do(Command{Delete: &d})
				require.NotNil(t, r.Delete)
				assert.Equal(t, uint64(len(tc.gone)), r.Delete.Deleted)
				if prev {
					assert.Equal(t, tc.gone, keysOf(r.Delete.PrevKVs))
					for _, kv := range r.Delete.PrevKVs {
						assert.Equal(t, "v-"+kv.Key, kv.Value)
						assert.Equal(t, uint64(1), kv.Version)
					}
				} else {
					assert.Nil(t, r.Delete.PrevKVs)
				}
				after, rev := state(t, h.kv)
				assert.Equal(t, h.idx, rev)
				var want []KeyValue
				for _, kv := range before {
					if !slices.Contains(tc.gone, kv.Key) {
						want = append(want, kv)
					}
				}
				assert.Equal(t, keysOf(want), keysOf(after))
				assert.Equal(t, want, after, "keys left alone keep their revisions")
			})
		}
	}
}

func TestRangeAsCommand(t *testing.T) {
	h := fixture(t)
	r := h.do(Command{Range: &Range{Key: "ab", RangeEnd: PrefixEnd("ab")}})
	assert.Equal(t, []string{"ab", "abc", "abd"}, keysOf(r.Range.KVs))
	assert.Equal(t, uint64(len(rangeFixture)+1), h.kv.Revision(), "a read through the log still takes an index")
}

func TestApplyNoOpMalformedAndOutOfOrder(t *testing.T) {
	h := newHarness(t)
	h.put("k", "v")
	want, _ := state(t, h.kv)

	assert.Nil(t, h.raw(nil), "an empty entry is a no-op")
	assert.Equal(t, uint64(2), h.kv.Revision(), "a no-op bumps the revision")

	bad := map[string][]byte{
		"garbage":         []byte("not a command"),
		"unknown version": {9, 0x80},
		"no op":           mustEncode(t, &Command{}),
		"two ops":         mustEncode(t, &Command{Put: &Put{Key: "x"}, Delete: &Delete{Key: "k"}}),
		"empty key":       mustEncode(t, &Command{Put: &Put{Value: "v"}}),
		"delete then put": mustEncode(t, &Command{Txn: &Txn{Success: []Op{delOp("k", "\x00"), putOp("k", "w")}}}),
	}
	for name, data := range bad {
		res := h.raw(data)
		err, ok := res.(error)
		require.Truef(t, ok, "%s: Apply returned %T, want an error", name, res)
		assert.ErrorIsf(t, err, ErrInvalid, "%s", name)
		assert.Equalf(t, h.idx, h.kv.Revision(), "%s: a refused command still takes its index", name)
		got, _ := state(t, h.kv)
		assert.Equalf(t, want, got, "%s: a refused command changes nothing", name)
	}

	// A stamp that Restore would refuse is kept out of the state.
	b, err := EncodeCommand(Command{Put: &Put{Key: "x", Value: "y"}})
	require.NoError(t, err)
	e := h.entry(b)
	e.Stamp.QT = append(e.Stamp.QT, e.Stamp.QT[0]) // unsorted
	res := h.kv.Apply(e)
	require.Error(t, res.(error))
	_, ok := h.kv.Get("x")
	assert.False(t, ok)

	// Out of order: the same index again, and an older one.
	rev := h.kv.Revision()
	for _, idx := range []uint64{rev, rev - 1, 0} {
		res := h.kv.Apply(fsm.Entry{Index: idx, Stamp: stampAt(idx), Data: b})
		err, ok := res.(error)
		require.True(t, ok)
		assert.True(t, errors.Is(err, ErrOutOfOrder), err)
		assert.Equal(t, rev, h.kv.Revision())
		_, ok = h.kv.Get("x")
		assert.False(t, ok)
	}

	// Gaps are allowed: revision is simply the last applied index.
	res = h.kv.Apply(fsm.Entry{Index: rev + 10, Stamp: stampAt(rev + 10), Data: b})
	assert.Equal(t, rev+10, res.(*Result).Revision)
	kv, _ := h.kv.Get("x")
	assert.Equal(t, rev+10, kv.ModRevision)
}

func mustEncode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := encode("test value", v, MaxCommandSize)
	require.NoError(t, err)
	return b
}

func TestApplyDoesNotRetainEntryMemory(t *testing.T) {
	kv := NewKV()
	b, err := EncodeCommand(Command{Put: &Put{Key: "key", Value: "value"}})
	require.NoError(t, err)
	e := fsm.Entry{Index: 1, Stamp: stampAt(1), Data: b}
	kv.Apply(e)
	for i := range b {
		b[i] = 0
	}
	e.Stamp.QT[0].Process = 99
	got, ok := kv.Get("key")
	require.True(t, ok)
	assert.Equal(t, "value", got.Value)
	assert.Equal(t, stampAt(1), got.Stamp)
}

func TestApplyBatchMatchesApply(t *testing.T) {
	var es []fsm.Entry
	cmds := []Command{
		{Put: &Put{Key: "a", Value: "1"}},
		{Put: &Put{Key: "b", Value: "2"}},
		{Txn: &Txn{Compares: []Compare{{Key: "a", Target: TargetValue, Op: Equal, Value: "1"}}, Success: []Op{putOp("a", "3"), delOp("b", "")}}},
		{Range: &Range{Key: "\x00", RangeEnd: "\x00"}},
	}
	for i, c := range cmds {
		b, err := EncodeCommand(c)
		require.NoError(t, err)
		es = append(es, fsm.Entry{Index: uint64(i + 1), Stamp: stampAt(uint64(i + 1)), Data: b})
	}
	es = append(es, fsm.Entry{Index: 5, Stamp: stampAt(5)}, fsm.Entry{Index: 6, Stamp: stampAt(6), Data: []byte{1, 2, 3}})

	one, batch := NewKV(), NewKV()
	var want []any
	for _, e := range es {
		want = append(want, one.Apply(e))
	}
	got := batch.ApplyBatch(es)
	require.Len(t, got, len(es))
	for i := range want {
		if err, ok := want[i].(error); ok {
			assert.EqualError(t, got[i].(error), err.Error())
			continue
		}
		assert.Equal(t, want[i], got[i], "entry %d", i+1)
	}
	s1, r1 := state(t, one)
	s2, r2 := state(t, batch)
	assert.Equal(t, s1, s2)
	assert.Equal(t, r1, r2)
	assert.Equal(t, uint64(6), r2)
}

// The KV satisfies the interfaces the log will use.
var (
	_ fsm.BatchFSM = (*KV)(nil)
	_ fsm.Querier  = (*KV)(nil)
)

// Multi-key ranges and deletes go around the keys under SystemPrefix
// unless they start there; single-key operations reach them.
func TestSystemKeysHiddenFromRanges(t *testing.T) {
	h := newHarness(t)
	sys := SystemPrefix + "http/1"
	for _, k := range []string{"\x00", "\x00a", sys, SystemPrefix + "x", "\x00f", "a"} {
		h.put(k, "v")
	}
	keys := func(r *RangeResult) []string {
		var out []string
		for _, kv := range r.KVs {
			out = append(out, kv.Key)
		}
		return out
	}
	all := h.do(Command{Range: &Range{Key: "\x00", RangeEnd: "\x00"}}).Range
	assert.Equal(t, []string{"\x00", "\x00a", "\x00f", "a"}, keys(all))
	assert.Equal(t, uint64(4), all.Count)

	limited := h.do(Command{Range: &Range{Key: "\x00", RangeEnd: "\x00", Limit: 2}}).Range
	assert.Equal(t, []string{"\x00", "\x00a"}, keys(limited))
	assert.True(t, limited.More)
	assert.Equal(t, uint64(4), limited.Count)

	bounded := h.do(Command{Range: &Range{Key: "\x00a", RangeEnd: "\x00z"}}).Range
	assert.Equal(t, []string{"\x00a", "\x00f"}, keys(bounded))

	own := h.do(Command{Range: &Range{Key: SystemPrefix, RangeEnd: PrefixEnd(SystemPrefix)}}).Range
	assert.Equal(t, []string{sys, SystemPrefix + "x"}, keys(own), "a range that starts under the prefix sees it")

	one := h.do(Command{Range: &Range{Key: sys}}).Range
	assert.Equal(t, []string{sys}, keys(one))

	del := h.do(Command{Delete: &Delete{Key: "\x00", RangeEnd: "\x00"}}).Delete
	assert.Equal(t, uint64(4), del.Deleted)
	_, ok := h.kv.Get(sys)
	assert.True(t, ok, "deleting every key leaves the system keys")
	assert.Equal(t, 2, h.kv.Len())
}
