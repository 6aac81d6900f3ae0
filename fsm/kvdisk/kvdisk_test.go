package kvdisk_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/fsmtest"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/stretchr/testify/require"
)

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func open(dir string) (fsm.DiskFSM, io.Closer, error) {
	kv, err := kvdisk.Open(dir)
	return kv, nopCloser{}, err
}

// command draws a kvfsm command over a few keys: puts, deletes, and
// transactions that compare.
func command(r *rand.Rand) []byte {
	key := fmt.Sprintf("k%d", r.IntN(12))
	var c kvfsm.Command
	switch x := r.IntN(10); {
	case x < 6:
		c = kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: fmt.Sprintf("v%d", r.IntN(1000))}}
	case x < 8:
		c = kvfsm.Command{Delete: &kvfsm.Delete{Key: key}}
	default:
		c = kvfsm.CASValue(key, fmt.Sprintf("v%d", r.IntN(1000)), "cas")
	}
	b, err := kvfsm.EncodeCommand(c)
	if err != nil {
		panic(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	fsmtest.TestDiskFSM(t, fsmtest.Suite{Open: open, Command: command, DetectsCorruption: true})
}

// The suite with the state compared by queries rather than snapshot
// bytes, as an embedder whose snapshots are not byte-for-byte
// deterministic would run it.
func TestConformanceByQueries(t *testing.T) {
	fsmtest.TestDiskFSM(t, fsmtest.Suite{Open: open, Command: command, Seed: 7, Entries: 64,
		State: func(f fsm.DiskFSM) ([]byte, error) {
			q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: "\x00", RangeEnd: "\x00"})
			if err != nil {
				return nil, err
			}
			return f.(fsm.Querier).Query(q)
		}})
}

func stampAt(i uint64) edict.Stamp {
	return edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 5}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: 5}}}, Counter: i}
}

func put(t *testing.T, kv *kvdisk.KV, i uint64, key, value string) {
	t.Helper()
	b, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: value}})
	require.NoError(t, err)
	res := kv.Apply(fsm.Entry{Index: i, Stamp: stampAt(i), Data: b})
	_, ok := res.(*kvfsm.Result)
	require.True(t, ok, "apply %d: %v", i, res)
}

// Open refuses a state file that does not decode, naming it, rather than
// start empty; and removes what a crash inside Sync or Restore left.
func TestOpenRefusesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	kv, err := kvdisk.Open(dir)
	require.NoError(t, err)
	put(t, kv, 1, "a", "1")
	d, err := kv.Sync()
	require.NoError(t, err)
	require.Equal(t, uint64(1), d)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "state.tmp-123"), []byte("half a sync"), 0o600))

	kv, err = kvdisk.Open(dir)
	require.NoError(t, err)
	got, ok := kv.Get("a")
	require.True(t, ok)
	require.Equal(t, "1", got.Value)
	_, err = os.Stat(filepath.Join(dir, "state.tmp-123"))
	require.ErrorIs(t, err, os.ErrNotExist, "the leftover of a crash is removed")

	b, err := os.ReadFile(filepath.Join(dir, "state"))
	require.NoError(t, err)
	b[len(b)/2] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(dir, "state"), b, 0o600))
	_, err = kvdisk.Open(dir)
	require.ErrorContains(t, err, filepath.Join(dir, "state"))
	require.ErrorIs(t, err, kvfsm.ErrCorruptSnapshot)
}

// A Sync with nothing applied since the last one writes nothing.
func TestSyncWritesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	kv, err := kvdisk.Open(dir)
	require.NoError(t, err)
	d, err := kv.Sync()
	require.NoError(t, err)
	require.Equal(t, uint64(0), d)
	_, err = os.Stat(filepath.Join(dir, "state"))
	require.ErrorIs(t, err, os.ErrNotExist, "an empty state is no file")
	put(t, kv, 1, "a", "1")
	_, err = kv.Sync()
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(dir, "state"))
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "state"), st.ModTime().Add(-1e9), st.ModTime().Add(-1e9)))
	before, err := os.Stat(filepath.Join(dir, "state"))
	require.NoError(t, err)
	_, err = kv.Sync()
	require.NoError(t, err)
	after, err := os.Stat(filepath.Join(dir, "state"))
	require.NoError(t, err)
	require.Equal(t, before.ModTime(), after.ModTime())
}
