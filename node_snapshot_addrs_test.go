package edictlog_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// A member that was down while a learner was added catches up by a
// snapshot past the config edict that named the learner's address. It
// learns the address from the snapshot all the same: its transport can
// reach the learner, its store keeps the address, and so does a restart
// (Jepsen: such a member later led the epoch and never reached the new
// process).
func TestNodeSnapshotCatchUpTeachesLearnerAddress(t *testing.T) {
	c := newNetCluster(t, 3, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 64, 8 })
	c.put("early", "v")
	l := c.waitLeader(10 * time.Second)
	lagger := c.others(l.id)[0]
	waitApplied(t, c.barrier(), lagger)
	c.kill(lagger.id)

	// The learner need not run: only its address matters here.
	const addr4 = "127.0.0.1:9"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l = c.waitLeader(10 * time.Second)
	require.NoError(t, l.AddLearner(ctx, 4, addr4))
	for i := range 80 {
		c.put(fmt.Sprintf("key-%02d", i), "v")
	}
	l = c.waitLeader(10 * time.Second)
	_, err := l.Snapshot(ctx)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() error {
		metas, err := l.snaps.List()
		if err != nil || len(metas) == 0 {
			return fmt.Errorf("no snapshot yet: %v", err)
		}
		if first := l.Status().FirstIndex; first <= 3 {
			return fmt.Errorf("the leader's log still starts at %d", first)
		}
		return nil
	})

	lagger = c.restart(lagger.id)
	_, known := lagger.net.PeerAddr(4)
	require.False(t, known, "the restarted member was never told of the learner")
	waitApplied(t, c.barrier(), lagger)
	require.Contains(t, lagger.Status().Learners, edict.ProcessID(4))
	installed, err := lagger.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, installed, "the member caught up by a snapshot")

	got, known := lagger.net.PeerAddr(4)
	require.True(t, known, "the member's transport learned the learner's address from the snapshot")
	require.Equal(t, addr4, got)
	b, err := lagger.store.Get(fmt.Sprintf("peers/%016x", 4))
	require.NoError(t, err, "and its store keeps it")
	require.Equal(t, addr4, string(b))

	// A restart reads it back.
	c.stop(lagger.id)
	lagger = c.restart(lagger.id)
	got, known = lagger.net.PeerAddr(4)
	require.True(t, known)
	require.Equal(t, addr4, got)
}

// A process that crashed after an installed snapshot was published and
// before the addresses it brought were stored under peers/ finds them in
// the snapshot's metadata. They only fill gaps: an address stored under
// peers/ was learned later, and one given for this start (Config.Peers)
// is the embedder's.
func TestRecoverTakesAddressesFromTheSnapshot(t *testing.T) {
	store := storage.NewMemStore()
	require.NoError(t, store.Set(fmt.Sprintf("peers/%016x", 5), []byte("stored-5")))
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	meta := wire.SnapshotMeta{Index: 5, Reign: stampAt(200, 0), Stamp: stampAt(200, 3),
		Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4, 5}},
		Addrs:  map[edict.ProcessID]string{1: "snap-1", 4: "snap-4", 5: "snap-5"}}
	sink, err := snaps.Create(meta)
	require.NoError(t, err)
	_, err = sink.Write([]byte("state"))
	require.NoError(t, err)
	require.NoError(t, sink.Close())

	restore := func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	rec, err := replog.Recover(3, store, snaps, restore, map[edict.ProcessID]string{1: "boot-1", 2: "boot-2", 3: "boot-3"}, false)
	require.NoError(t, err)
	require.Equal(t, map[edict.ProcessID]string{1: "boot-1", 2: "boot-2", 3: "boot-3", 4: "snap-4", 5: "stored-5"}, rec.Peers)
}
