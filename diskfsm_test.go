package edictlog_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// diskKV is a kvdisk.KV that records what the log asks of it: the
// indexes applied, the restores, what each Sync returned. lag makes its
// Sync report that many entries fewer than it applied (as a state machine
// that reports only what an earlier flush made durable would); syncNext
// makes it sync by itself once it applies the next entry (as one that
// commits its own store now and then).
type diskKV struct {
	*kvdisk.KV
	lag uint64

	mu       sync.Mutex
	applied  []uint64
	stamps   map[uint64]edict.Stamp
	restores int
	stages   int
	installs int
	synced   []uint64
	syncNext bool
}

func openDiskKV(t testing.TB, dir string) *diskKV {
	t.Helper()
	kv, err := kvdisk.Open(dir)
	require.NoError(t, err)
	return &diskKV{KV: kv, stamps: map[uint64]edict.Stamp{}}
}

func (d *diskKV) note(es ...fsm.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range es {
		d.applied = append(d.applied, e.Index)
		d.stamps[e.Index] = e.Stamp
	}
}

func (d *diskKV) Apply(e fsm.Entry) any {
	d.note(e)
	res := d.KV.Apply(e)
	d.maybeSyncItself()
	return res
}

func (d *diskKV) ApplyBatch(es []fsm.Entry) []any {
	d.note(es...)
	res := d.KV.ApplyBatch(es)
	d.maybeSyncItself()
	return res
}

func (d *diskKV) maybeSyncItself() {
	d.mu.Lock()
	now := d.syncNext
	d.syncNext = false
	d.mu.Unlock()
	if now {
		if _, err := d.KV.Sync(); err != nil {
			panic(err)
		}
	}
}

func (d *diskKV) Sync() (uint64, error) {
	i, err := d.KV.Sync()
	if err != nil {
		return 0, err
	}
	if i >= d.lag {
		i -= d.lag
	}
	d.mu.Lock()
	d.synced = append(d.synced, i)
	d.mu.Unlock()
	return i, nil
}

func (d *diskKV) Restore(r io.Reader) error {
	d.mu.Lock()
	d.restores++
	d.mu.Unlock()
	return d.KV.Restore(r)
}

func (d *diskKV) Stage(index uint64, r io.Reader) error {
	d.mu.Lock()
	d.stages++
	d.mu.Unlock()
	return d.KV.Stage(index, r)
}

func (d *diskKV) InstallStaged(index uint64) error {
	d.mu.Lock()
	d.installs++
	d.mu.Unlock()
	return d.KV.InstallStaged(index)
}

// staging reports how many Stages and InstallStageds were called.
func (d *diskKV) staging() (stages, installs int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stages, d.installs
}

// plainDisk is a DiskFSM that neither stages the snapshots it is sent
// nor knows the size of its snapshots: the log sends and installs its
// snapshots through the snapshot store and Restore.
type plainDisk struct {
	fsm.DiskFSM
	fsm.Querier
}

func (p plainDisk) Snapshot() (fsm.Snapshot, error) {
	s, err := p.DiskFSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return struct{ fsm.Snapshot }{s}, nil
}

func (d *diskKV) record() (applied []uint64, restores int, synced []uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.applied), d.restores, slices.Clone(d.synced)
}

// diskCluster is a netCluster whose nodes run a diskKV each, kept in a
// directory of their own across restarts.
type diskCluster struct {
	*netCluster
	tb  testing.TB
	dir string
	mu  sync.Mutex
	fsm map[edict.ProcessID]*diskKV
	lag uint64
	// plain gives the nodes their diskKV as a plainDisk.
	plain bool
}

// loadPastCompaction puts n keys, has the leader snapshot, and waits
// until its log starts past them, so that a member that joins now must
// be sent the state. It returns what was put and the leader.
func (c *diskCluster) loadPastCompaction(ctx context.Context, n int) (map[string]string, *netNode) {
	c.t.Helper()
	want := map[string]string{}
	for i := range n {
		k := fmt.Sprintf("k-%02d", i)
		want[k] = fmt.Sprint(i)
		c.put(k, want[k])
	}
	l := c.waitLeader(10 * time.Second)
	_, err := l.Snapshot(ctx)
	require.NoError(c.t, err)
	eventually(c.t, 10*time.Second, func() error {
		if first := l.Status().FirstIndex; first <= 2 {
			return fmt.Errorf("the leader's log still starts at %d", first)
		}
		return nil
	})
	return want, l
}

func newDiskCluster(t *testing.T, n int, lag uint64, tune ...func(*edictlog.Config)) *diskCluster {
	return newDiskClusterOf(t, n, lag, false, tune...)
}

// newDiskClusterOf is newDiskCluster, its state machines plainDisks if
// plain.
func newDiskClusterOf(t *testing.T, n int, lag uint64, plain bool, tune ...func(*edictlog.Config)) *diskCluster {
	dc := &diskCluster{tb: t, dir: t.TempDir(), fsm: map[edict.ProcessID]*diskKV{}, lag: lag, plain: plain}
	dc.netCluster = newNetCluster(t, n, append([]func(*edictlog.Config){dc.useDisk}, tune...)...)
	return dc
}

// useDisk is the tune that gives each node started its diskKV.
func (dc *diskCluster) useDisk(cfg *edictlog.Config) {
	d := openDiskKV(dc.tb, filepath.Join(dc.dir, fmt.Sprintf("fsm%d", cfg.ID)))
	d.lag = dc.lag
	dc.mu.Lock()
	dc.fsm[cfg.ID] = d
	plain := dc.plain
	dc.mu.Unlock()
	cfg.FSM = d
	if plain {
		cfg.FSM = plainDisk{DiskFSM: d, Querier: d}
	}
}

func (dc *diskCluster) disk(id edict.ProcessID) *diskKV {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.fsm[id]
}

// A member that restarts opens its state machine where its own store left
// it, ahead of the newest snapshot, and is handed only the entries after
// that: nothing is restored, and nothing it holds durably is applied
// again.
func TestNodeDiskFSMRestartAppliesOnlyAfterItsDurableIndex(t *testing.T) {
	c := newDiskCluster(t, 3, 0)
	for i := range 30 {
		c.put(fmt.Sprintf("a-%02d", i), "v")
	}
	l := c.waitLeader(10 * time.Second)
	f := c.others(l.id)[0]
	waitApplied(t, c.barrier(), f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	idx, err := f.Snapshot(ctx)
	require.NoError(t, err, "a snapshot that holds no copy of the state, at what the sync made durable")
	metas, err := f.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	snap := metas[0]
	require.Equal(t, snap.Index, idx, "Snapshot returns the index it covers")
	metaOnly, err := replog.IsMetaOnlySnapshot(f.snaps, snap)
	require.NoError(t, err)
	require.True(t, metaOnly, "the snapshot of a DiskFSM holds no copy of its state (%d bytes)", snap.Size)
	_, _, synced := c.disk(f.id).record()
	require.NotEmpty(t, synced, "the snapshot synced the state machine")
	require.Equal(t, synced[len(synced)-1], snap.Index, "the snapshot is at the index the sync returned")

	for i := range 20 {
		c.put(fmt.Sprintf("b-%02d", i), "v")
	}
	waitApplied(t, c.barrier(), f)
	// The state machine commits its own store at the next entry, past the
	// snapshot; what follows it is lost when the process stops.
	c.disk(f.id).mu.Lock()
	c.disk(f.id).syncNext = true
	c.disk(f.id).mu.Unlock()
	for i := range 10 {
		c.put(fmt.Sprintf("c-%02d", i), "v")
	}
	waitApplied(t, c.barrier(), f)
	durable, err := c.disk(f.id).DurableIndex()
	require.NoError(t, err)
	require.Greater(t, durable, snap.Index, "the state machine's own store is ahead of the snapshot")
	applied := f.Status().Applied
	require.Greater(t, applied, durable, "and entries applied after it are not durable there")
	c.kill(f.id)

	for i := range 10 {
		c.put(fmt.Sprintf("d-%02d", i), "v")
	}
	f = c.restart(f.id)
	require.GreaterOrEqual(t, f.Status().Applied, durable, "the log starts at the state machine's durable index")
	idx = c.barrier()
	waitApplied(t, idx, f)
	got, restores, _ := c.disk(f.id).record()
	require.Zero(t, restores, "nothing is restored: the state machine is ahead of the snapshot")
	require.NotEmpty(t, got)
	require.Equal(t, durable+1, got[0], "the first entry applied after the restart follows the durable index")
	for i, x := range got {
		require.Equal(t, durable+1+uint64(i), x, "entries are applied once each, in order, after the durable index")
	}
	require.Equal(t, dump(t, c.node(l.id)), dump(t, f), "the restarted member's state is the leader's")
}

// A state machine whose Sync reports less than it applied: the log records
// its snapshots at what Sync returned, with that entry's own stamp, and
// never compacts past it. No snapshot holds a copy of the state.
func TestNodeDiskFSMCompactsOnlyBehindWhatSyncReturned(t *testing.T) {
	c := newDiskCluster(t, 3, 5, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 16, 2 })
	check := func(nn *netNode) {
		t.Helper()
		_, _, synced := c.disk(nn.id).record()
		most := uint64(0)
		for _, s := range synced {
			most = max(most, s)
		}
		first := nn.Status().FirstIndex
		require.LessOrEqual(t, first-1, most, "node %v compacted its log up to %d; its state machine's Sync returned at most %d", nn.id, first-1, most)
	}
	for i := range 100 {
		c.put(fmt.Sprintf("k-%02d", i%40), fmt.Sprint(i))
		for _, nn := range c.others(0) {
			check(nn)
		}
	}
	waitApplied(t, c.barrier(), c.others(0)...)
	compacted := 0
	for _, nn := range c.others(0) {
		check(nn)
		metas, err := nn.snaps.List()
		require.NoError(t, err)
		require.NotEmpty(t, metas, "node %v took snapshots", nn.id)
		_, _, synced := c.disk(nn.id).record()
		for _, m := range metas {
			metaOnly, err := replog.IsMetaOnlySnapshot(nn.snaps, m)
			require.NoError(t, err)
			require.True(t, metaOnly, "node %v: snapshot at %d holds a copy of the state (%d bytes)", nn.id, m.Index, m.Size)
			require.Contains(t, synced, m.Index, "node %v: snapshot at %d, not an index Sync returned", nn.id, m.Index)
			d := c.disk(nn.id)
			d.mu.Lock()
			st, ok := d.stamps[m.Index]
			d.mu.Unlock()
			if ok {
				require.True(t, st.Equal(m.Stamp), "node %v: snapshot at %d carries another entry's stamp", nn.id, m.Index)
			}
		}
		if nn.Status().FirstIndex > 1 {
			compacted++
		}
	}
	require.Positive(t, compacted, "some log was compacted")
}

// A new member catches up from a leader whose newest snapshot holds no
// copy of the state. A state machine whose snapshots know their size
// (kvdisk's) is streamed straight from its Persist, and one that stages
// the snapshots it is sent (kvdisk) stages the stream and installs it:
// no copy of the state is written on either side but the member's own.
// A plain DiskFSM's state is copied into the leader's snapshot store and
// streamed from there, and the member stores it and restores it. Either
// way the member's state is durable, and a restart restores nothing.
func TestNodeDiskFSMNewMemberReceivesTheState(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%t", plain), func(t *testing.T) {
			c := newDiskClusterOf(t, 3, 0, plain, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 16, 4 })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			want, l := c.loadPastCompaction(ctx, 60)
			metas, err := l.snaps.List()
			require.NoError(t, err)
			require.NotEmpty(t, metas)
			metaOnly, err := replog.IsMetaOnlySnapshot(l.snaps, metas[0])
			require.NoError(t, err)
			require.True(t, metaOnly, "the leader's newest snapshot holds no copy of the state")

			tr := c.listen(4)
			n4 := c.startWith(4, tr, maps.Clone(c.addrs), func(cfg *edictlog.Config) { cfg.Join = true; c.useDisk(cfg) })
			l = c.waitLeader(10 * time.Second)
			require.NoError(t, l.AddLearner(ctx, 4, c.addrs[4]))
			c.checkAllApplied(want, n4)
			_, restores, _ := c.disk(4).record()
			stages, installs := c.disk(4).staging()
			installed, err := n4.snaps.List()
			require.NoError(t, err)
			require.NotEmpty(t, installed, "the new member recorded the snapshot")
			durable, err := c.disk(4).DurableIndex()
			require.NoError(t, err)
			require.GreaterOrEqual(t, durable, installed[len(installed)-1].Index, "the install is durable in the member's own store")
			copies := func(nn *netNode) int {
				metas, err := nn.snaps.List()
				require.NoError(t, err)
				n := 0
				for _, m := range metas {
					if mo, err := replog.IsMetaOnlySnapshot(nn.snaps, m); err == nil && !mo {
						n++
					}
				}
				return n
			}
			l = c.waitLeader(10 * time.Second)
			if plain {
				require.Equal(t, 1, restores, "the new member restored the copy it was sent")
				require.Zero(t, stages)
				require.Positive(t, copies(n4), "the new member stored the copy")
				require.Positive(t, copies(l), "the leader made a copy of the state for the member")
			} else {
				require.Zero(t, restores)
				require.Equal(t, 1, stages, "the new member staged the stream")
				require.Equal(t, 1, installs, "and installed what it staged")
				require.Zero(t, copies(n4), "the new member holds the state once: in its state machine")
				require.Zero(t, copies(l), "the leader streamed its state machine's snapshot, writing no copy")
				_, err := os.Stat(filepath.Join(c.dir, "fsm4", "staged"))
				require.ErrorIs(t, err, os.ErrNotExist, "nothing is left staged")
			}

			c.stop(4)
			n4 = c.restart(4)
			waitApplied(t, c.barrier(), n4)
			_, again, _ := c.disk(4).record()
			stages, installs = c.disk(4).staging()
			require.Zero(t, again+stages+installs, "a restart of the member restores nothing: its state machine holds the state")
			require.Equal(t, dump(t, l), dump(t, n4))
		})
	}
}

// recoverStores builds a process's stores for the Recover tests: a log of
// entries 1..last of one reign (puts of key k<i>), and a store of
// snapshots.
func recoverStores(t *testing.T, reign edict.Stamp, nanos int64, last uint64) (*storage.MemStore, *storage.MemSnapshotStore, []wire.Entry) {
	t.Helper()
	store := storage.NewMemStore()
	var es []wire.Entry
	for i := uint64(1); i <= last; i++ {
		b, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k%d", i), Value: "v"}})
		require.NoError(t, err)
		es = append(es, wire.Entry{Index: i, Reign: reign, Stamp: stampAt(nanos, i), Kind: wire.EntryCommand, Data: b})
	}
	enc, err := wire.EncodeStamp(reign)
	require.NoError(t, err)
	require.NoError(t, store.StoreBatch(wire.Batch{Entries: es, Stable: map[string][]byte{wire.KeyAcceptedReign: enc}}))
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	return store, snaps, es
}

// stateAt is a KV snapshot holding the puts of es up to index upTo.
func stateAt(t *testing.T, es []wire.Entry, upTo uint64) []byte {
	t.Helper()
	kv := kvfsm.NewKV()
	for _, e := range es[:upTo] {
		kv.Apply(fsm.Entry{Index: e.Index, Stamp: e.Stamp, Data: e.Data})
	}
	s, err := kv.Snapshot()
	require.NoError(t, err)
	defer s.Release()
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	return buf.Bytes()
}

func saveSnapshot(t *testing.T, snaps edictlog.SnapshotStore, meta wire.SnapshotMeta, data []byte) {
	t.Helper()
	sink, err := snaps.Create(meta)
	require.NoError(t, err)
	_, err = sink.Write(data)
	require.NoError(t, err)
	require.NoError(t, sink.Close())
}

// diskAt is a diskKV in a new directory holding es up to index upTo,
// synced.
func diskAt(t *testing.T, es []wire.Entry, upTo uint64) *diskKV {
	t.Helper()
	d := openDiskKV(t, t.TempDir())
	for _, e := range es[:upTo] {
		d.KV.Apply(fsm.Entry{Index: e.Index, Stamp: e.Stamp, Data: e.Data})
	}
	_, err := d.KV.Sync()
	require.NoError(t, err)
	return d
}

var recoverPeers = map[edict.ProcessID]string{1: "a", 2: "b", 3: "c"}

var threeMembers = wire.EpochConfig{Epoch: 0, Members: []edict.ProcessID{1, 2, 3}}

// A snapshot installed from a leader, its log reset not yet written: the
// state machine was restored from it (a crash after the restore), or not
// yet (a crash before). Either way the start completes the install —
// restoring only a state machine behind the snapshot — and starts at the
// snapshot, the old log gone.
func TestRecoverDiskFSMCompletesAnInterruptedInstall(t *testing.T) {
	for _, restored := range []bool{true, false} {
		t.Run(fmt.Sprintf("restored=%t", restored), func(t *testing.T) {
			oldReign, newReign := stampAt(100, 0), stampAt(200, 0)
			store, snaps, es := recoverStores(t, oldReign, 100, 10)
			// The leader's log: entries 1..5 of another reign.
			_, _, leaderLog := recoverStores(t, newReign, 200, 5)
			data := stateAt(t, leaderLog, 5)
			saveSnapshot(t, snaps, wire.SnapshotMeta{Index: 5, Reign: newReign, Stamp: leaderLog[4].Stamp, Config: threeMembers}, data)
			d := diskAt(t, es, 3)
			if restored {
				require.NoError(t, d.KV.Restore(bytes.NewReader(data)))
			}
			for range 2 { // and a second start from the same stores is the same
				rec, err := replog.RecoverDiskFSM(3, store, snaps, d, recoverPeers, false)
				require.NoError(t, err)
				require.Equal(t, uint64(5), rec.Applied)
				require.Equal(t, wire.Entry{Index: 5, Reign: newReign, Stamp: leaderLog[4].Stamp}, rec.AppliedEntry)
				require.Empty(t, rec.State.Entries, "nothing of the replaced log follows the snapshot")
				require.True(t, rec.State.AcceptedReign.Equal(newReign))
				last, err := store.Last()
				require.NoError(t, err)
				require.Equal(t, uint64(5), last.Index, "the store starts over at the snapshot")
				require.True(t, last.Stamp.Equal(leaderLog[4].Stamp))
				kv, ok := d.Get("k5")
				require.True(t, ok)
				require.True(t, kv.Stamp.Equal(leaderLog[4].Stamp), "the state machine holds the leader's state")
				_, ok = d.Get("k6")
				require.False(t, ok)
			}
			_, restores, _ := d.record()
			if restored {
				require.Zero(t, restores, "a state machine restored before the crash is not restored again")
			} else {
				require.Equal(t, 1, restores, "a state machine behind the snapshot is restored from it, once")
			}
		})
	}
}

// A snapshot installed from a leader into a state machine that stages
// what it is sent (fsm.StagingFSM), and a crash at each point of the
// install: the start completes it — the state machine installs what it
// staged if the snapshot is recorded and it is below it, and discards
// what it staged if the snapshot is not recorded — or refuses stores
// that cannot be, naming them. The log's reset to the snapshot is
// completed as for any install.
func TestRecoverDiskFSMInstallsWhatItStaged(t *testing.T) {
	oldReign, newReign := stampAt(100, 0), stampAt(200, 0)
	_, _, leaderLog := recoverStores(t, newReign, 200, 5)
	data := stateAt(t, leaderLog, 5)
	meta := wire.SnapshotMeta{Index: 5, Reign: newReign, Stamp: leaderLog[4].Stamp, Config: threeMembers}
	for _, tc := range []struct {
		name                        string
		last                        uint64 // of the old log
		staged, installed, recorded bool
		plain                       bool
		applied                     uint64 // 0: the start fails
		installs                    int    // by the start
		err                         string
	}{
		{name: "staged, not recorded", last: 10, staged: true, applied: 3},
		{name: "staged and recorded", last: 10, staged: true, recorded: true, applied: 5, installs: 1},
		{name: "installed and recorded", last: 10, staged: true, installed: true, recorded: true, applied: 5},
		{name: "recorded, nothing staged", last: 10, recorded: true, err: "nothing is staged"},
		{name: "installed, not recorded", last: 3, staged: true, installed: true, err: "durable up to index 5, but the log ends at 3"},
		{name: "recorded for a state machine that stages nothing", last: 10, staged: true, recorded: true, plain: true, err: "stages nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, snaps, es := recoverStores(t, oldReign, 100, tc.last)
			d := diskAt(t, es, 3)
			if tc.staged {
				require.NoError(t, d.KV.Stage(5, bytes.NewReader(data)))
			}
			if tc.installed {
				require.NoError(t, d.KV.InstallStaged(5))
			}
			if tc.recorded {
				_, err := replog.SaveStagedSnapshot(snaps, meta)
				require.NoError(t, err)
			}
			var f fsm.DiskFSM = d
			if tc.plain {
				f = plainDisk{DiskFSM: d, Querier: d}
			}
			for range 2 { // and a second start from the same stores is the same
				rec, err := replog.RecoverDiskFSM(3, store, snaps, f, recoverPeers, false)
				if tc.err != "" {
					require.ErrorContains(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.applied, rec.Applied)
				durable, err := d.DurableIndex()
				require.NoError(t, err)
				require.Equal(t, tc.applied, durable)
				kv, ok := d.Get("k3")
				require.True(t, ok)
				if tc.applied == 5 {
					require.Equal(t, wire.Entry{Index: 5, Reign: newReign, Stamp: leaderLog[4].Stamp}, rec.AppliedEntry)
					require.Empty(t, rec.State.Entries, "nothing of the replaced log follows the snapshot")
					require.True(t, rec.State.AcceptedReign.Equal(newReign))
					last, err := store.Last()
					require.NoError(t, err)
					require.Equal(t, uint64(5), last.Index, "the store starts over at the snapshot")
					require.True(t, kv.Stamp.Equal(leaderLog[2].Stamp), "the state machine holds the leader's state")
				} else {
					require.Len(t, rec.State.Entries, int(tc.last), "the whole log is loaded (no snapshot)")
					require.True(t, kv.Stamp.Equal(es[2].Stamp), "the state machine holds its own state")
				}
			}
			require.Error(t, d.KV.InstallStaged(5), "nothing is staged after a start")
			_, installs := d.staging()
			require.Equal(t, tc.installs, installs)
		})
	}
}

// The newest snapshot holds a copy of the state: a state machine below
// it is restored from it, one at or above it is not, and the Core starts
// at whichever is higher, with the log after it.
func TestRecoverDiskFSMRestoresOnlyWhenBehindTheSnapshot(t *testing.T) {
	reign := stampAt(100, 0)
	for _, tc := range []struct {
		durable, applied uint64
		restores         int
	}{{3, 8, 1}, {8, 8, 0}, {10, 10, 0}, {12, 12, 0}} {
		t.Run(fmt.Sprintf("durable=%d", tc.durable), func(t *testing.T) {
			store, snaps, es := recoverStores(t, reign, 100, 12)
			saveSnapshot(t, snaps, wire.SnapshotMeta{Index: 8, Reign: reign, Stamp: es[7].Stamp, Config: threeMembers}, stateAt(t, es, 8))
			d := diskAt(t, es, tc.durable)
			rec, err := replog.RecoverDiskFSM(3, store, snaps, d, recoverPeers, false)
			require.NoError(t, err)
			_, restores, _ := d.record()
			require.Equal(t, tc.restores, restores)
			require.Equal(t, tc.applied, rec.Applied)
			require.Equal(t, wire.Entry{Index: tc.applied, Reign: reign, Stamp: es[tc.applied-1].Stamp}, rec.AppliedEntry)
			require.Equal(t, uint64(8), rec.State.Snapshot.Index)
			require.Len(t, rec.State.Entries, 4, "the log after the snapshot is loaded, whatever the state machine holds")
			got, err := d.DurableIndex()
			require.NoError(t, err)
			require.Equal(t, tc.applied, got)

			// The Core starts there: it hands out nothing the state
			// machine holds, and knows it all committed.
			core, err := replog.NewCore(replog.CoreConfig{ID: 3, Elect: electConfig(3)}, rec.State, edict.Time{Incarnation: rec.Incarnation, Nanos: 1})
			require.NoError(t, err)
			st := core.Status(edict.Time{Incarnation: rec.Incarnation, Nanos: 2})
			require.Equal(t, tc.applied, st.Applied)
			require.Equal(t, tc.applied, st.Commit)
			require.Empty(t, core.Ready().Apply)
		})
	}
}

// What no correct pair of stores can hold is refused, naming both, rather
// than started from a guess.
func TestRecoverDiskFSMRefusesWhatTheStoresCannotHold(t *testing.T) {
	reign := stampAt(100, 0)
	t.Run("state machine beyond the log", func(t *testing.T) {
		store, snaps, es := recoverStores(t, reign, 100, 12)
		d := diskAt(t, es, 12)
		require.NoError(t, store.StoreBatch(wire.Batch{TruncateFrom: 10}))
		_, err := replog.RecoverDiskFSM(3, store, snaps, d, recoverPeers, false)
		require.ErrorContains(t, err, "durable up to index 12, but the log ends at 9")
	})
	t.Run("snapshot without a copy ahead of the state machine", func(t *testing.T) {
		store, snaps, es := recoverStores(t, reign, 100, 12)
		_, err := replog.SaveMetaOnlySnapshot(snaps, wire.SnapshotMeta{Index: 8, Reign: reign, Stamp: es[7].Stamp, Config: threeMembers})
		require.NoError(t, err)
		d := diskAt(t, es, 3)
		_, err = replog.RecoverDiskFSM(3, store, snaps, d, recoverPeers, false)
		require.ErrorContains(t, err, "durable up to index 3")
		require.ErrorContains(t, err, "lost what it had made durable")
	})
	t.Run("snapshot without a copy for a state machine in memory", func(t *testing.T) {
		store, snaps, es := recoverStores(t, reign, 100, 12)
		_, err := replog.SaveMetaOnlySnapshot(snaps, wire.SnapshotMeta{Index: 8, Reign: reign, Stamp: es[7].Stamp, Config: threeMembers})
		require.NoError(t, err)
		_, err = replog.Recover(3, store, snaps, kvfsm.NewKV().Restore, recoverPeers, false)
		require.ErrorContains(t, err, "holds no copy of the state")
	})
	t.Run("a copy that does not carry its index", func(t *testing.T) {
		store, snaps, es := recoverStores(t, reign, 100, 12)
		saveSnapshot(t, snaps, wire.SnapshotMeta{Index: 8, Reign: reign, Stamp: es[7].Stamp, Config: threeMembers}, stateAt(t, es, 7))
		d := diskAt(t, es, 3)
		_, err := replog.RecoverDiskFSM(3, store, snaps, d, recoverPeers, false)
		require.ErrorContains(t, err, "reports index 7 durable")
	})
}

func electConfig(id edict.ProcessID) elect.Config {
	return elect.Config{Detector: elect.NewLowestLive(id, threeMembers.Members, time.Second), Rand: rand.New(rand.NewPCG(uint64(id), 1))}
}
