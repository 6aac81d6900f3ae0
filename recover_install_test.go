package edictlog_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// stampAt is a well-formed stamp of a reign whose quorum read the clocks
// at nanos.
func stampAt(nanos int64, counter uint64) edict.Stamp {
	qt, err := edict.NewQT(edict.Reading{Process: 1, T: edict.Time{Incarnation: 1, Nanos: nanos}},
		edict.Reading{Process: 2, T: edict.Time{Incarnation: 1, Nanos: nanos}})
	if err != nil {
		panic(err)
	}
	return edict.Stamp{QT: qt, Counter: counter}
}

// A follower stores a snapshot a leader streamed to it, its entry at the
// snapshot's index being another reign's, and crashes before the batch
// that replaces its log is written. It must start again: the install is
// completed from the snapshot (the log starts over after it, the accepted
// reign is raised to the snapshot's), not refused for the mismatch until
// an operator deletes the log.
func TestRecoverCompletesAnInterruptedInstall(t *testing.T) {
	store := storage.NewMemStore()
	oldReign := stampAt(100, 0)
	var es []wire.Entry
	for i := uint64(1); i <= 10; i++ {
		es = append(es, wire.Entry{Index: i, Reign: oldReign, Stamp: stampAt(100, i), Kind: wire.EntryCommand, Data: []byte(fmt.Sprint(i))})
	}
	enc, err := wire.EncodeStamp(oldReign)
	require.NoError(t, err)
	require.NoError(t, store.StoreBatch(wire.Batch{Entries: es, Stable: map[string][]byte{wire.KeyAcceptedReign: enc}}))

	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	newReign := stampAt(200, 0)
	meta := wire.SnapshotMeta{Index: 5, Reign: newReign, Stamp: stampAt(200, 3),
		Config: wire.EpochConfig{Epoch: 0, Members: []edict.ProcessID{1, 2, 3}}}
	sink, err := snaps.Create(meta)
	require.NoError(t, err)
	_, err = sink.Write([]byte("state"))
	require.NoError(t, err)
	require.NoError(t, sink.Close())

	var restored []byte
	restore := func(r io.Reader) (err error) { restored, err = io.ReadAll(r); return err }
	peers := map[edict.ProcessID]string{1: "a", 2: "b", 3: "c"}
	rec, err := replog.Recover(3, store, snaps, restore, peers, false)
	require.NoError(t, err, "a crash inside a snapshot install leaves a process that starts")
	require.Equal(t, "state", string(restored))
	require.Equal(t, uint64(5), rec.Applied)
	require.Empty(t, rec.State.Entries, "nothing of the replaced log follows the snapshot")
	require.True(t, rec.State.AcceptedReign.Equal(newReign), "the accepted reign is the snapshot's")
	last, err := store.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(5), last, "the store starts over at the snapshot")
	b, err := store.Get(wire.KeyAcceptedReign)
	require.NoError(t, err)
	stored, err := wire.DecodeStamp(wire.KeyAcceptedReign, b)
	require.NoError(t, err)
	require.True(t, stored.Equal(newReign), "and holds the raised accepted reign")

	// And a second start from the same stores is the same.
	_, err = replog.Recover(3, store, snaps, restore, peers, false)
	require.NoError(t, err)
}
