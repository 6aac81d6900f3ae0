package edictlog_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/require"
)

// storedAddr is the address nn keeps for id under peers/, "" if none.
func storedAddr(t testing.TB, nn *netNode, id edict.ProcessID) string {
	t.Helper()
	b, err := nn.store.Get(fmt.Sprintf("peers/%016x", uint64(id)))
	if err != nil {
		return ""
	}
	return string(b)
}

// servesThrough waits until nn answers a follower read of key with want
// and leads a write after a transfer to it: reads and writes through nn,
// which needs every member to reach it.
func servesThrough(t *testing.T, c *netCluster, nn *netNode, key, want string) {
	t.Helper()
	start := time.Now()
	level := edictlog.ReadFollower
	eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		level = edictlog.ReadFollower
		if nn.Status().IsLeader {
			level = edictlog.ReadLease
		}
		v, ok, _, err := readKey(ctx, nn.Node, level, key)
		switch {
		case err != nil:
			return err
		case !ok || v != want:
			return fmt.Errorf("read %q = %q, %v; want %q", key, v, ok, want)
		}
		return nil
	})
	t.Logf("node %v answered a %v read %v after the call", nn.id, level, time.Since(start).Round(time.Millisecond))
	eventually(t, 30*time.Second, func() error {
		if nn.Status().IsLeader {
			return nil
		}
		l := c.waitLeader(20 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return l.TransferLeadership(ctx, nn.id)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := nn.Apply(ctx, putCmd(t, key, want+"!"))
	require.NoError(t, err, "write through node %v", nn.id)
}

// A member restarted on a new port, with peers that still know only its
// old one, is found by them as it connects (the transport's hello names
// its address): it serves reads and writes again, the leader makes the
// address the cluster's, and a process restarted later uses it.
func TestRestartOnNewPortIsAnnounced(t *testing.T) {
	c := newNetCluster(t, 3)
	l := c.waitLeader(20 * time.Second)
	c.put("k", "v1")
	var f *netNode
	for _, o := range c.others(l.id) {
		f = o
	}
	oldAddr := c.addrs[f.id]
	staleView := map[edict.ProcessID]string{}
	for id, a := range c.addrs {
		staleView[id] = a
	}
	c.kill(f.id)
	c.put("k", "v2")

	start := time.Now()
	tr := c.listen(f.id) // a new port; the running nodes are not told
	require.NotEqual(t, oldAddr, c.addrs[f.id])
	f = c.startWith(f.id, tr, staleView)
	servesThrough(t, c, f, "k", "v2")
	t.Logf("restarted on a new port: served a read and led a write %v after its start", time.Since(start).Round(time.Millisecond))

	// The address is the cluster's, kept in every store.
	for _, o := range c.others(f.id) {
		eventually(t, 10*time.Second, func() error {
			if got := storedAddr(t, o, f.id); got != c.addrs[f.id] {
				return fmt.Errorf("node %v keeps %q for %v, want %q", o.id, got, f.id, c.addrs[f.id])
			}
			return nil
		})
	}
	// A process restarted from its store, given the stale address in
	// Config.Peers and told nothing, reaches f at the new one.
	other := c.others(f.id)[0]
	c.stop(other.id)
	tr2 := c.listen(other.id)
	other = c.startWith(other.id, tr2, staleView)
	a, ok := other.net.PeerAddr(f.id)
	require.True(t, ok)
	require.Equal(t, c.addrs[f.id], a, "restarted node %v reaches %v at", other.id, f.id)
	servesThrough(t, c, other, "k", "v2!")
}

// hiddenTransport is a transport that says nothing of addresses: it
// hides TCP's AddressAnnouncer.
type hiddenTransport struct{ edictlog.Transport }

// startHidden starts id's Node from its files on tr, hiding tr's
// announcements.
func (c *netCluster) startHidden(id edict.ProcessID, tr *transport.TCP, peers map[edict.ProcessID]string) *netNode {
	c.t.Helper()
	store, err := storage.OpenWAL(filepath.Join(c.dir, fmt.Sprintf("n%d.wal", id)), nil)
	require.NoError(c.t, err)
	snaps, err := storage.NewFileSnapshotStore(filepath.Join(c.dir, fmt.Sprintf("snap%d", id)), 2)
	require.NoError(c.t, err)
	kv := kvfsm.NewKV()
	cfg := edictlog.Config{ID: id, Peers: peers, Store: store, Snapshots: snaps, Transport: hiddenTransport{tr}, FSM: kv, Logger: c.logger}
	for _, f := range c.tune {
		f(&cfg)
	}
	n, err := edictlog.Start(context.Background(), cfg)
	require.NoError(c.t, err)
	nn := &netNode{id: id, net: tr, store: store, snaps: snaps, kv: kv, Node: n, cfg: cfg}
	c.nodes[id] = nn
	return nn
}

// Node.SetAddress changes a member's address with no announcement: every
// process reaches it there once the change commits, keeps it, and the
// leader keeps leading throughout.
func TestSetAddress(t *testing.T) {
	c := &netCluster{t: t, dir: t.TempDir(), logger: quietLogger(), tune: []func(*edictlog.Config){testTimings},
		nodes: map[edict.ProcessID]*netNode{}, addrs: map[edict.ProcessID]string{}}
	t.Cleanup(c.stopAll)
	trs := map[edict.ProcessID]*transport.TCP{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		trs[id] = c.listen(id)
	}
	boot := map[edict.ProcessID]string{}
	for id, a := range c.addrs {
		boot[id] = a
	}
	for id := edict.ProcessID(1); id <= 3; id++ {
		c.startHidden(id, trs[id], boot)
	}
	l := c.waitLeader(20 * time.Second)
	c.put("k", "v1")
	var f edict.ProcessID
	for _, o := range c.others(l.id) {
		f = o.id
	}
	reign := l.Status().Reign
	c.kill(f)
	tr := c.listen(f)
	newAddr := c.addrs[f]

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var me *edictlog.MembershipError
	require.ErrorAs(t, l.SetAddress(ctx, 9, newAddr), &me, "an address for a process not in the configuration")
	require.ErrorIs(t, me, edictlog.ErrNotMember)
	require.ErrorIs(t, l.SetAddress(ctx, f, ""), edictlog.ErrBadAddress)
	var nl *edictlog.NotLeaderError
	require.ErrorAs(t, c.others(l.id)[0].SetAddress(ctx, f, newAddr), &nl, "a follower proposes nothing")

	require.NoError(t, l.SetAddress(ctx, f, newAddr))
	require.True(t, l.Status().IsLeader, "the leader still leads")
	require.Equal(t, reign, l.Status().Reign, "in the same reign")
	for _, o := range c.nodes {
		eventually(t, 10*time.Second, func() error {
			if a, _ := o.net.PeerAddr(f); a != newAddr {
				return fmt.Errorf("node %v reaches %v at %q", o.id, f, a)
			}
			if got := storedAddr(t, o, f); got != newAddr {
				return fmt.Errorf("node %v keeps %q", o.id, got)
			}
			return nil
		})
	}
	// Restarted there, with the bootstrap addresses, it serves.
	c.put("k", "v2")
	nf := c.startHidden(f, tr, boot)
	servesThrough(t, c, nf, "k", "v2")
}

// An address set for a member stands, in the epoch and reign in force,
// even where the member announced another before; the member's next life
// announces its address again, and the cluster takes it.
func TestSetAddressStandsUntilTheMemberAnnounces(t *testing.T) {
	c := newNetCluster(t, 3)
	l := c.waitLeader(20 * time.Second)
	c.put("k", "v1")
	epoch, reign := l.Status().Epoch, l.Status().Reign
	f := c.others(l.id)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const wrong = "127.0.0.1:1"
	require.NoError(t, l.SetAddress(ctx, f.id, wrong))
	c.put("k", "v2") // with a quorum of the other two
	waitApplied(t, c.barrier(), c.others(f.id)...)
	for _, o := range c.others(f.id) {
		require.Equal(t, wrong, storedAddr(t, o, f.id), "node %v", o.id)
		a, _ := o.net.PeerAddr(f.id)
		require.Equal(t, wrong, a, "node %v", o.id)
	}
	s := l.Status()
	require.True(t, s.IsLeader)
	require.Equal(t, epoch, s.Epoch)
	require.Equal(t, reign, s.Reign)

	c.kill(f.id)
	tr := c.listen(f.id)
	f = c.startWith(f.id, tr, c.addrs)
	servesThrough(t, c, f, "k", "v2")
	for _, o := range c.others(f.id) {
		eventually(t, 10*time.Second, func() error {
			if got := storedAddr(t, o, f.id); got != c.addrs[f.id] {
				return fmt.Errorf("node %v keeps %q for %v, want %q", o.id, got, f.id, c.addrs[f.id])
			}
			return nil
		})
	}
}

// A member that was down while an address changed catches up by a
// snapshot past the config edict that changed it: it learns the address
// from the snapshot, keeps it, and a restart reads it back.
func TestSnapshotCarriesChangedAddress(t *testing.T) {
	c := newNetCluster(t, 3, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 64, 8 })
	l := c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The learner need not run: only its address matters here.
	const addr4, addr4b = "127.0.0.1:9", "127.0.0.1:10"
	require.NoError(t, l.AddLearner(ctx, 4, addr4))
	lagger := c.others(l.id)[0]
	waitApplied(t, c.barrier(), lagger)
	require.Equal(t, addr4, storedAddr(t, lagger, 4))
	c.kill(lagger.id)

	l = c.waitLeader(10 * time.Second)
	require.NoError(t, l.SetAddress(ctx, 4, addr4b))
	changedAt := l.Status().Applied // the change is applied here when SetAddress returns
	for i := range 80 {
		c.put(fmt.Sprintf("key-%02d", i), "v")
	}
	l = c.waitLeader(10 * time.Second)
	_, err := l.Snapshot(ctx)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() error {
		if first := l.Status().FirstIndex; first <= changedAt {
			return fmt.Errorf("the leader's log still starts at %d, holding the change at or before %d", first, changedAt)
		}
		return nil
	})

	lagger = c.restart(lagger.id)
	waitApplied(t, c.barrier(), lagger)
	installed, err := lagger.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, installed, "the member caught up by a snapshot")
	got, _ := lagger.net.PeerAddr(4)
	require.Equal(t, addr4b, got, "the member reaches the learner at the changed address")
	require.Equal(t, addr4b, storedAddr(t, lagger, 4), "and keeps it")

	c.stop(lagger.id)
	lagger = c.restart(lagger.id)
	got, _ = lagger.net.PeerAddr(4)
	require.Equal(t, addr4b, got, "a restart reads it back")
}
