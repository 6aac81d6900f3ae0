package storagetest

// The stable-store contract, and the tests that span the whole store:
// closing, concurrent use and reopening.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

func testStable(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	_, err := s.Get("missing")
	require.ErrorIs(t, err, wire.ErrNotFound)
	require.ErrorContains(t, err, "missing")
	require.NoError(t, s.Set("a/1", []byte("one")))
	require.NoError(t, s.Set("a/2", []byte("two")))
	require.NoError(t, s.Set("b", nil))
	require.NoError(t, s.Set("a/1", []byte("uno")))
	v, err := s.Get("a/1")
	require.NoError(t, err)
	require.Equal(t, "uno", string(v))
	v, err = s.Get("b")
	require.NoError(t, err)
	require.Empty(t, v)
	keys, err := s.Keys("a/")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1", "a/2"}, keys)
	keys, err = s.Keys("")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1", "a/2", "b"}, keys)
	keys, err = s.Keys("zzz")
	require.NoError(t, err)
	require.Empty(t, keys)
	require.NoError(t, s.Delete("a/1"))
	require.NoError(t, s.Delete("a/1"), "deleting a missing key is fine")
	_, err = s.Get("a/1")
	require.ErrorIs(t, err, wire.ErrNotFound)

	require.ErrorIs(t, s.Set("", []byte("x")), storage.ErrInvalid)
	require.ErrorIs(t, s.Set(string(make([]byte, storage.MaxKeySize+1)), nil), storage.ErrInvalid)
	require.ErrorIs(t, s.Set("big", make([]byte, storage.MaxValueSize+1)), storage.ErrInvalid)
	require.ErrorIs(t, s.Set(wire.KeyIncarnation, wire.EncodeUint64(7)), storage.ErrReservedKey)
	require.ErrorIs(t, s.Delete(wire.KeyIncarnation), storage.ErrReservedKey)
	_, err = s.Get("")
	require.ErrorIs(t, err, storage.ErrInvalid)
	require.NoError(t, s.Set("max", make([]byte, storage.MaxValueSize)))
}

func testBatchAtomic(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.Set("old", []byte("x")))
	require.NoError(t, s.StoreBatch(wire.Batch{
		Entries: Entries(1, 3, reign1, 8),
		Stable:  map[string][]byte{wire.KeyAcceptedReign: []byte("r1"), "n": []byte("3")},
		Delete:  []string{"old"},
	}))
	requireLog(t, s, 1, 3, 8)
	v, err := s.Get(wire.KeyAcceptedReign)
	require.NoError(t, err)
	require.Equal(t, "r1", string(v))
	_, err = s.Get("old")
	require.ErrorIs(t, err, wire.ErrNotFound)
	err = s.StoreBatch(wire.Batch{Stable: map[string][]byte{"x": nil}, Delete: []string{"x"}})
	require.ErrorIs(t, err, storage.ErrInvalid)
	// A batch refused for its stable part stores none of its entries.
	err = s.StoreBatch(wire.Batch{Entries: Entries(4, 1, reign1, 8), Stable: map[string][]byte{"": nil}})
	require.ErrorIs(t, err, storage.ErrInvalid)
	requireLog(t, s, 1, 3, 8)
}

func testIncarnation(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	_, err := s.Get(wire.KeyIncarnation)
	require.ErrorIs(t, err, wire.ErrNotFound)
	for want := uint64(1); want <= 3; want++ {
		got, err := s.BumpIncarnation()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	n, err := getRecord(wire.DecodeUint64, s, wire.KeyIncarnation)
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

func testRecords(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.Set(wire.KeyCurrentEpoch, wire.EncodeUint64(1<<40)))
	n, err := getRecord(wire.DecodeUint64, s, wire.KeyCurrentEpoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1<<40), n)

	st := Stamp(3, 77)
	require.NoError(t, setRecord(s, wire.KeyAcceptedReign, st, wire.EncodeStamp))
	got, err := getRecord(wire.DecodeStamp, s, wire.KeyAcceptedReign)
	require.NoError(t, err)
	require.True(t, st.Equal(got))

	cfg := wire.EpochConfig{Epoch: 4, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{9}}
	require.NoError(t, setRecord(s, wire.EpochConfigKey(cfg.Epoch), cfg, wire.EncodeEpochConfig))
	c, err := getRecord(wire.DecodeEpochConfig, s, wire.EpochConfigKey(4))
	require.NoError(t, err)
	require.Equal(t, cfg, c)
	require.NoError(t, setRecord(s, wire.EpochConfigKey(5), wire.EpochConfig{Epoch: 5, Members: []edict.ProcessID{2}}, wire.EncodeEpochConfig))
	keys, err := s.Keys(wire.EpochKeyPrefix)
	require.NoError(t, err)
	require.Equal(t, []string{wire.EpochConfigKey(4), wire.EpochConfigKey(5)}, keys)
	_, err = getRecord(wire.DecodeEpochConfig, s, wire.EpochConfigKey(6))
	require.ErrorIs(t, err, wire.ErrNotFound)
	require.Error(t, setRecord(s, wire.EpochConfigKey(6), wire.EpochConfig{Epoch: 6, Members: []edict.ProcessID{2, 1}}, wire.EncodeEpochConfig))

	// A record of the wrong type is corrupt, not misread.
	require.NoError(t, s.Set("junk", []byte("junk")))
	_, err = getRecord(wire.DecodeUint64, s, "junk")
	require.ErrorIs(t, err, wire.ErrCorrupt)
	_, err = getRecord(wire.DecodeStamp, s, "junk")
	require.ErrorIs(t, err, wire.ErrCorrupt)
	require.NoError(t, s.Set(wire.EpochConfigKey(7), wire.EncodeUint64(7)))
	_, err = getRecord(wire.DecodeEpochConfig, s, wire.EpochConfigKey(7))
	require.ErrorIs(t, err, wire.ErrCorrupt)
}

func testClosed(t *testing.T, h StoreHarness) {
	s := h.Open(t, t.TempDir())
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 1, reign1, 8)}))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), storage.ErrClosed)
	require.ErrorIs(t, s.StoreBatch(wire.Batch{Entries: Entries(2, 1, reign1, 8)}), storage.ErrClosed)
	require.ErrorIs(t, s.StoreBatch(wire.Batch{}), storage.ErrClosed)
	_, err := s.Entries(1, 2, 0)
	require.ErrorIs(t, err, storage.ErrClosed)
	_, err = s.FirstIndex()
	require.ErrorIs(t, err, storage.ErrClosed)
	_, err = s.LastIndex()
	require.ErrorIs(t, err, storage.ErrClosed)
	_, err = s.Last()
	require.ErrorIs(t, err, storage.ErrClosed)
	require.ErrorIs(t, s.CompactPrefix(1), storage.ErrClosed)
	_, err = s.Stats()
	require.ErrorIs(t, err, storage.ErrClosed)
	_, err = s.Get("k")
	require.ErrorIs(t, err, storage.ErrClosed)
	require.ErrorIs(t, s.Set("k", nil), storage.ErrClosed)
	_, err = s.Keys("")
	require.ErrorIs(t, err, storage.ErrClosed)
	_, err = s.BumpIncarnation()
	require.ErrorIs(t, err, storage.ErrClosed)
}

// testConcurrent runs readers against a writer that appends, truncates and
// compacts; every read must see a contiguous, intact range.
func testConcurrent(t *testing.T, h StoreHarness) {
	s, _ := open(t, h)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 10, reign1, 16)}))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				first, err1 := s.FirstIndex()
				last, err2 := s.LastIndex()
				if err1 != nil || err2 != nil {
					errs <- fmt.Errorf("bounds: %v %v", err1, err2)
					return
				}
				es, err := s.Entries(first, last+1, 0)
				if err != nil && !isRace(err) {
					errs <- err
					return
				}
				for i, e := range es {
					if e.Index != first+uint64(i) || !bytes.Equal(e.Data, Data(e.Index, 16)) {
						errs <- fmt.Errorf("entry %d read as %d or with wrong data", first+uint64(i), e.Index)
						return
					}
				}
			}
		}()
	}
	first, next := uint64(1), uint64(11)
	for i := 0; i < 60; i++ {
		err := s.StoreBatch(wire.Batch{Entries: Entries(next, 5, reign1, 16)})
		require.NoError(t, err)
		next += 5
		if i%7 == 6 {
			require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: next - 2}))
			next -= 2
		}
		if i%10 == 9 {
			require.NoError(t, s.CompactPrefix(next-20))
			first = next - 19
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	requireLog(t, s, first, next-1, 16)
}

// isRace tells the errors a reader may legitimately get when the log moved
// between its bounds query and its read.
func isRace(err error) bool {
	return errors.Is(err, storage.ErrCompacted) || errors.Is(err, storage.ErrUnavailable)
}

func testReopen(t *testing.T, h StoreHarness) {
	if !h.Durable {
		t.Skip("store is not durable")
	}
	dir := t.TempDir()
	s := h.Open(t, dir)
	inc, err := s.BumpIncarnation()
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: Entries(1, 50, reign1, 32), Stable: map[string][]byte{"a": []byte("1")}}))
	require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: 41, Entries: Entries(41, 5, reign1, 32)}))
	require.NoError(t, s.CompactPrefix(10))
	st, err := s.Stats()
	require.NoError(t, err)
	before := st.Fsyncs
	require.NoError(t, s.StoreBatch(wire.Batch{}))
	require.NoError(t, s.Set("b", []byte("2")))
	require.NoError(t, s.Delete("a"))
	st, err = s.Stats()
	require.NoError(t, err)
	require.Equal(t, before+2, st.Fsyncs, "one fsync per non-empty commit, none for an empty batch")
	require.Positive(t, st.FsyncTime)
	require.NoError(t, s.Close())

	s = h.Open(t, dir)
	defer s.Close()
	requireLog(t, s, 11, 45, 32)
	requireLastStamp(t, s, 45, Stamp(1, 45))
	v, err := s.Get("b")
	require.NoError(t, err)
	require.Equal(t, "2", string(v))
	_, err = s.Get("a")
	require.ErrorIs(t, err, wire.ErrNotFound)
	next, err := s.BumpIncarnation()
	require.NoError(t, err)
	require.Equal(t, inc+1, next)
	// An emptied log remembers its position across a restart.
	require.NoError(t, s.CompactPrefix(45))
	require.NoError(t, s.Close())
	s = h.Open(t, dir)
	defer s.Close()
	requireLog(t, s, 46, 45, 32)
	requireLastStamp(t, s, 45, Stamp(1, 45))
}

// getRecord reads a typed record through the store: what the log does with
// the well-known keys of package wire.
func getRecord[T any](decode func(key string, b []byte) (T, error), s edictlog.StableStore, key string) (T, error) {
	b, err := s.Get(key)
	if err != nil {
		var zero T
		return zero, err
	}
	return decode(key, b)
}

func setRecord[T any](s edictlog.StableStore, key string, v T, encode func(T) ([]byte, error)) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	return s.Set(key, b)
}
