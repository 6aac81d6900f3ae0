package storagetest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// Store is what RunStore checks: the log's Store (edictlog.Store, the contract
// the log relies on) and what every store of package storage adds.
type Store interface {
	edictlog.Store
	Stats() (storage.Stats, error)
	Close() error
}

// SnapshotStore is what RunSnapshotStore checks: the log's SnapshotStore
// and the maintenance operations of package storage's stores.
type SnapshotStore interface {
	edictlog.SnapshotStore
	Verify(id string) error
	Delete(id string) error
}

// StoreHarness tells RunStore how to get stores.
type StoreHarness struct {
	// Open returns the store kept in dir, creating it if needed. Each
	// subtest gets its own empty dir and may reopen it after Close.
	Open func(t testing.TB, dir string) Store
	// Durable says that a store reopened on the same dir holds everything
	// stored before Close, and that Stats counts one fsync per commit.
	Durable bool
}

// RunStore runs the log and stable store contract against h.
func RunStore(t *testing.T, h StoreHarness) {
	tests := []struct {
		name string
		f    func(*testing.T, StoreHarness)
	}{
		{"Empty", testEmpty},
		{"AppendRead", testAppendRead},
		{"Contiguity", testContiguity},
		{"Truncate", testTruncate},
		{"MaxBytes", testMaxBytes},
		{"Compact", testCompact},
		{"Reset", testReset},
		{"Stable", testStable},
		{"BatchAtomic", testBatchAtomic},
		{"Incarnation", testIncarnation},
		{"Records", testRecords},
		{"InvalidEntries", testInvalidEntries},
		{"NoAliasing", testNoAliasing},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

func open(t *testing.T, h StoreHarness) (Store, string) {
	dir := t.TempDir()
	s := h.Open(t, dir)
	t.Cleanup(func() { s.Close() })
	return s, dir
}

var reign1 = Stamp(1, 1)

// requireLog checks the bounds and that every entry first..last is the
// one Entries generates with size bytes (from the given reign).
func requireLog(t *testing.T, s Store, first, last uint64, size int) {
	t.Helper()
	f, err := s.FirstIndex()
	require.NoError(t, err)
	l, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, first, f, "first index")
	require.Equal(t, last, l, "last index")
	got, err := s.Entries(first, last+1, 0)
	require.NoError(t, err)
	require.Len(t, got, int(last+1-first))
	for i, e := range got {
		requireEntry(t, Entries(first+uint64(i), 1, reign1, size)[0], e)
	}
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, last+1-first, st.Entries)
}

func requireEntry(t *testing.T, want, got wire.Entry) {
	t.Helper()
	require.Equal(t, want.Index, got.Index)
	require.True(t, want.Reign.Equal(got.Reign), "reign of %d: %v, want %v", want.Index, got.Reign, want.Reign)
	require.True(t, want.Stamp.Equal(got.Stamp), "stamp of %d: %v, want %v", want.Index, got.Stamp, want.Stamp)
	require.Equal(t, want.Kind, got.Kind)
	require.True(t, bytes.Equal(want.Data, got.Data), "data of entry %d differs", want.Index)
}

func requireLastStamp(t *testing.T, s Store, idx uint64, st edict.Stamp) {
	t.Helper()
	p, err := s.Last()
	require.NoError(t, err)
	require.Equal(t, idx, p.Index)
	require.True(t, st.Equal(p.Stamp), "last stamp %v, want %v", p.Stamp, st)
}

func testEmpty(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	requireLog(t, s, 1, 0, 0)
	requireLastStamp(t, s, 0, edict.Stamp{})
	es, err := s.Entries(1, 1, 0)
	require.NoError(t, err)
	require.Empty(t, es)
	_, err = s.Entries(1, 2, 0)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	_, err = s.Entries(0, 1, 0)
	require.ErrorIs(t, err, storage.ErrCompacted)
	_, err = s.Entries(2, 1, 0)
	require.ErrorIs(t, err, storage.ErrInvalid)
	require.NoError(t, s.StoreBatch(wire.Batch{}), "an empty batch is a no-op")
	require.NoError(t, s.CompactPrefix(0), "compacting nothing is a no-op")
}

func testAppendRead(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 1, reign1, 10)}))
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(2, 16, reign1, 10)}))
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(18, 256, reign1, 10)}))
	requireLog(t, s, 1, 273, 10)
	requireLastStamp(t, s, 273, Stamp(1, 273))
	es, err := s.Entries(100, 105, 0)
	require.NoError(t, err)
	require.Len(t, es, 5)
	require.Equal(t, uint64(100), es[0].Index)
	_, err = s.Entries(270, 275, 0)
	require.ErrorIs(t, err, storage.ErrUnavailable)

	// Every kind, empty data and zero stamps (bootstrap) round-trip.
	kinds := []wire.EntryKind{wire.EntryCommand, wire.EntryReignStart, wire.EntryStop, wire.EntryConfig}
	var batch []wire.Entry
	for i, k := range kinds {
		batch = append(batch, wire.Entry{Index: 274 + uint64(i), Kind: k, Data: nil})
	}
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: batch}))
	es, err = s.Entries(274, 278, 0)
	require.NoError(t, err)
	for i, e := range es {
		require.Equal(t, kinds[i], e.Kind)
		require.True(t, e.Stamp.IsZero())
		require.Empty(t, e.Data)
	}
	requireLastStamp(t, s, 277, edict.Stamp{})
}

func testContiguity(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 5, reign1, 8)}))
	for name, b := range map[string]wire.Batch{
		"gap before":      {Entries: Entries(7, 2, reign1, 8)},
		"overlap":         {Entries: Entries(5, 2, reign1, 8)},
		"gap inside":      {Entries: append(Entries(6, 1, reign1, 8), Entries(8, 1, reign1, 8)...)},
		"truncate past":   {TruncateFrom: 7},
		"truncate, wrong": {TruncateFrom: 3, Entries: Entries(5, 1, reign1, 8)},
	} {
		b.Stable = map[string][]byte{"k": []byte("v")}
		err := s.StoreBatch(b)
		require.ErrorIs(t, err, storage.ErrNotContiguous, name)
		requireLog(t, s, 1, 5, 8)
		_, err = s.Get("k")
		require.ErrorIs(t, err, wire.ErrNotFound, "%s: a refused batch changes nothing", name)
	}
	err := s.StoreBatch(wire.Batch{Entries: Entries(9, 1, reign1, 8)})
	require.ErrorContains(t, err, "index 9, want 6")
}

func testTruncate(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 10, reign1, 8)}))
	// Replace a conflicting suffix in one batch.
	reign2 := Stamp(1, 500)
	repl := Entries(7, 3, reign2, 8)
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 7, Entries: repl}))
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(9), last)
	got, err := s.Entries(7, 10, 0)
	require.NoError(t, err)
	for i := range repl {
		requireEntry(t, repl[i], got[i])
	}
	requireLastStamp(t, s, 9, repl[2].Stamp)
	// Truncation alone moves the last stamp back.
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 5}))
	requireLog(t, s, 1, 4, 8)
	requireLastStamp(t, s, 4, Stamp(1, 4))
	// Truncating at LastIndex+1 is allowed and changes nothing.
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 5}))
	requireLog(t, s, 1, 4, 8)
	// Below the first index is compacted.
	require.NoError(t, s.CompactPrefix(2))
	err = s.StoreBatch(wire.Batch{TruncateFrom: 2})
	require.ErrorIs(t, err, storage.ErrCompacted)
	// Truncating everything left keeps the stamp of the compacted entry.
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 3}))
	requireLog(t, s, 3, 2, 8)
	requireLastStamp(t, s, 2, Stamp(1, 2))
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(3, 2, reign1, 8)}))
	requireLog(t, s, 3, 4, 8)
}

func testMaxBytes(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 20, reign1, 100)}))
	one, err := wire.EncodeEntry(Entries(1, 1, reign1, 100)[0])
	require.NoError(t, err)
	size := len(one)
	for _, tc := range []struct {
		max  int
		want int
	}{
		{0, 20}, {-1, 20}, {1, 1}, {size, 1}, {size + 1, 1}, {3 * size, 3}, {3*size + size/2, 3}, {100 * size, 20},
	} {
		es, err := s.Entries(1, 21, tc.max)
		require.NoError(t, err)
		require.Len(t, es, tc.want, "maxBytes %d (entries of %d bytes)", tc.max, size)
		for i, e := range es {
			require.Equal(t, uint64(1+i), e.Index)
		}
	}
}

func testCompact(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 100, reign1, 8)}))
	require.NoError(t, s.CompactPrefix(40))
	requireLog(t, s, 41, 100, 8)
	_, err := s.Entries(40, 42, 0)
	require.ErrorIs(t, err, storage.ErrCompacted)
	require.NoError(t, s.CompactPrefix(10), "compacting below the first index is a no-op")
	requireLog(t, s, 41, 100, 8)
	require.ErrorIs(t, s.CompactPrefix(101), storage.ErrUnavailable)
	// Compacting everything leaves an empty log that remembers where it was.
	require.NoError(t, s.CompactPrefix(100))
	requireLog(t, s, 101, 100, 8)
	requireLastStamp(t, s, 100, Stamp(1, 100))
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 1, reign1, 8)}), storage.ErrNotContiguous)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(101, 5, reign1, 8)}))
	requireLog(t, s, 101, 105, 8)
}

func testReset(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 10, reign1, 8)}))
	snap := Stamp(1, 1000)
	require.NoError(t, s.StoreBatch(wire.Batch{
		Reset:   &wire.Position{Index: 1000, Stamp: snap},
		Entries: Entries(1001, 2, reign1, 8),
	}))
	requireLog(t, s, 1001, 1002, 8)
	require.NoError(t, s.StoreBatch(wire.Batch{Reset: &wire.Position{Index: 5, Stamp: Stamp(1, 5)}}))
	requireLog(t, s, 6, 5, 8)
	requireLastStamp(t, s, 5, Stamp(1, 5))
	err := s.StoreBatch(wire.Batch{Reset: &wire.Position{Index: 5}, TruncateFrom: 3})
	require.ErrorIs(t, err, storage.ErrInvalid)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(6, 1, reign1, 8)}))
	requireLog(t, s, 6, 6, 8)
}

func testInvalidEntries(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	bad := Entries(1, 2, reign1, 8)
	bad[1].Kind = 99
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: bad}), storage.ErrInvalid)
	bad = Entries(1, 1, reign1, 8)
	bad[0].Stamp.QT = edict.QT{{Process: 2}, {Process: 1}}
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: bad}), storage.ErrInvalid)
	bad = Entries(1, 1, reign1, 8)
	bad[0].Reign = edict.Stamp{Epoch: 1}
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: bad}), storage.ErrInvalid)
	bad = Entries(1, 1, reign1, wire.MaxEntrySize)
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: bad}), storage.ErrInvalid)
	requireLog(t, s, 1, 0, 8)
}

func testNoAliasing(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	es := Entries(1, 3, reign1, 8)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: es}))
	es[0].Data[0] ^= 0xff
	es[1].Stamp.QT[0].T.Nanos++
	es[2].Stamp.QT[0].T.Nanos++
	requireLog(t, s, 1, 3, 8)
	p, err := s.Last()
	require.NoError(t, err)
	p.Stamp.QT[0].T.Nanos++
	requireLastStamp(t, s, 3, Stamp(1, 3))
	got, err := s.Entries(1, 4, 0)
	require.NoError(t, err)
	got[0].Data[0] ^= 0xff
	requireLog(t, s, 1, 3, 8)
	val := []byte("value")
	require.NoError(t, s.Set("k", val))
	val[0] = 'X'
	v, err := s.Get("k")
	require.NoError(t, err)
	require.Equal(t, "value", string(v))
	v[0] = 'Y'
	v, err = s.Get("k")
	require.NoError(t, err)
	require.Equal(t, "value", string(v))
	// Entries read earlier stay intact while the store moves on.
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 1, Entries: Entries(1, 200, Stamp(1, 9), 64)}))
	require.NoError(t, s.CompactPrefix(150))
	requireEntry(t, Entries(2, 1, reign1, 8)[0], got[1])
}
