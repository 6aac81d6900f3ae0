package replog

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// holds reports whether id's store holds an entry carrying data.
func (c *tcluster) holds(id edict.ProcessID, data string) bool {
	return slices.ContainsFunc(c.stored[id], func(e wire.Entry) bool { return string(e.Data) == data })
}

// A follower that stops cleanly refuses its leader's renewals, records
// the stop only once its grant has lapsed, and its next life accepts
// appends and grants at once; the life after that one, which crashed, is
// quarantined: the record spoke for one life only. Fails without the
// rule (a restarted life is always quarantined) and with
// EDICT_MUTATE=clean-record-cleared or elect's clean-stop-waits (go test
// -tags edictmutate).
func TestCleanStopSkipsTheQuarantineOnce(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())

	c.cores[3].Retire(c.reading(3))
	c.collect(3)
	now := c.reading(3)
	gs, _ := c.cores[3].el.Grant(0)
	require.Equal(t, edict.ProcessID(1), gs.Grantee)
	require.True(t, now.Before(gs.Finish), "p3 grants to p1 when it begins to retire")
	require.False(t, c.cores[3].Retired(), "p3's grant to p1 still stands")
	require.Equal(t, gs.Finish, c.cores[3].RetiredAt())
	require.NotContains(t, c.stable[3], wire.KeyCleanStop)

	// p3 refuses p1's renewals: its grant runs out at its first F_q, and
	// p1 leads on with p2's grants. Only then is the record written.
	for c.reading(3).Before(gs.Finish) {
		c.settle(5*time.Millisecond, nil)
		if c.reading(3).Before(gs.Finish) {
			require.NotContains(t, c.stable[3], wire.KeyCleanStop, "recorded before p3's grant lapsed")
		}
	}
	c.settle(10*time.Millisecond, nil)
	g, _ := c.cores[3].el.Grant(0)
	require.Equal(t, gs.Finish, g.Finish, "no renewal was granted")
	require.True(t, c.cores[3].Retired())
	inc, err := wire.DecodeUint64(wire.KeyCleanStop, c.stable[3][wire.KeyCleanStop])
	require.NoError(t, err)
	require.Equal(t, uint64(1), inc, "the record names the life that stopped")
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1 kept its lease through the stop")

	// The next life: no quarantine. It accepts p1's appends and grants
	// p1's renewals at once.
	c.crash(3)
	c.boot(3, c.storedEpochs(3))
	start := c.reading(3)
	require.False(t, c.cores[3].el.Quarantined(start), "restarted after a clean stop")
	c.propose(1, "x")
	c.settle(50*time.Millisecond, nil)
	require.True(t, c.holds(3, "x"), "the life after a clean stop accepts appends at once")
	c.settle(200*time.Millisecond, nil) // a renewal of p1's, still within a quarantine's length
	require.True(t, c.reading(3).Before(start.Add(c.cores[3].el.MaxLease())))
	g, _ = c.cores[3].el.Grant(0)
	require.Equal(t, edict.ProcessID(1), g.Grantee)
	require.True(t, start.Before(g.Finish), "and grants p1's renewals")

	// That life crashes: the record names the life before it, and the
	// next is quarantined, appends refused.
	c.crash(3)
	c.boot(3, c.storedEpochs(3))
	require.True(t, c.cores[3].el.Quarantined(c.reading(3)), "a crash is quarantined, whatever the record of an earlier life says")
	c.propose(1, "y")
	c.settle(50*time.Millisecond, nil)
	require.False(t, c.holds(3, "y"), "no append accepted in quarantine")
	c.settle(c.cores[3].el.MaxLease()+50*time.Millisecond, nil)
	require.True(t, c.holds(3, "y"), "once the quarantine ends")
}

// Recover takes the clean-stop record for the life right after the one
// that wrote it, and for no other.
func TestRecoverReadsTheCleanStopRecord(t *testing.T) {
	store := storage.NewMemStore()
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	peers := map[edict.ProcessID]string{1: "a", 2: "b", 3: "c"}
	start := func() Recovery {
		rec, err := Recover(1, store, snaps, func(io.Reader) error { return nil }, peers, false)
		require.NoError(t, err)
		return rec
	}
	rec := start()
	require.Equal(t, uint64(1), rec.Incarnation)
	require.False(t, rec.State.CleanStop, "a first start")
	rec = start()
	require.False(t, rec.State.CleanStop, "after a crash")
	require.NoError(t, store.Set(wire.KeyCleanStop, wire.EncodeUint64(rec.Incarnation)))
	rec = start()
	require.True(t, rec.State.CleanStop, "after a clean stop")
	rec = start()
	require.False(t, rec.State.CleanStop, "after a crash of the life that followed it")
	require.NoError(t, store.Set(wire.KeyCleanStop, []byte{1, 2}))
	_, err = Recover(1, store, snaps, nil, peers, false)
	require.ErrorContains(t, err, wire.KeyCleanStop, "a damaged record is an error naming it")
}
