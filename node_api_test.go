package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/require"
)

// testMaxLease is MaxLease under testTimings: 2·(RoundTrip+RenewInterval).
const testMaxLease = 650 * time.Millisecond

// TransferLeadership returns once the target leads. Writes acknowledged
// before and after are applied on every node; a write racing the transfer
// either succeeds, or fails with an error that says it never takes effect
// (a NotLeaderError, wrapping ErrTransferring and naming the target while
// the transfer runs, or ErrNotCommitted when the new reign overwrote it) —
// and then it is indeed absent — or says its outcome is unknown. Nothing
// acknowledged is lost.
// neverTakesEffect reports whether a write's error says it never takes effect: a
// refusal (NotLeaderError, whatever the cause), or ErrNotCommitted — it was
// appended by the old reign and overwritten by the new one.
func neverTakesEffect(err error) bool {
	var nl *edictlog.NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, edictlog.ErrNotCommitted)
}

func TestNodeTransferLeadership(t *testing.T) {
	c := newNetCluster(t, 3)
	want := map[string]string{}
	for i := range 10 {
		k := fmt.Sprintf("before-%02d", i)
		want[k] = "v" + k
		c.put(k, want[k])
	}
	old := c.waitLeader(10 * time.Second)
	target := c.others(old.id)[1]

	type outcome struct {
		key string
		err error
	}
	var (
		outcomes  []outcome
		successes atomic.Int64
		refusals  atomic.Int64
		stop      = make(chan struct{})
		done      = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("race-%04d", i)
			cmd, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: k, Value: "v" + k}})
			if err != nil {
				panic(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = old.Apply(ctx, cmd)
			cancel()
			outcomes = append(outcomes, outcome{k, err})
			if err == nil {
				successes.Add(1)
			} else {
				if neverTakesEffect(err) {
					refusals.Add(1)
				}
				time.Sleep(time.Millisecond) // the old leader refuses at once
			}
		}
	}()
	eventually(t, 10*time.Second, func() error {
		if successes.Load() < 5 {
			return errors.New("the racing writer has not written yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, old.TransferLeadership(ctx, target.id))
	refusedBefore := refusals.Load()
	t.Logf("transfer %v→%v returned after %v", old.id, target.id, time.Since(start))
	// Let the racing writer meet the new state. A write pending at the
	// transfer is answered only when the new reign applies its index, so the
	// writer may wait a while before it sees the first refusal.
	eventually(t, 10*time.Second, func() error {
		if refusals.Load() == refusedBefore {
			return errors.New("the old leader has refused no write since the transfer")
		}
		return nil
	})
	close(stop)
	<-done

	// The target leads, not the old leader nor the third node.
	l := c.waitLeader(10 * time.Second)
	require.Equal(t, target.id, l.id)
	require.False(t, old.Status().IsLeader)
	eventually(t, 10*time.Second, func() error {
		if s := old.Status(); s.Leader != target.id {
			return fmt.Errorf("the old leader knows %v as leader, not its successor %v", s.Leader, target.id)
		}
		return nil
	})

	for i := range 10 {
		k := fmt.Sprintf("after-%02d", i)
		want[k] = "v" + k
		res, err := target.Apply(ctx, putCmd(t, k, want[k]))
		require.NoError(t, err)
		require.NotZero(t, res.Index)
	}

	var ok, refused, unknown []string
	for _, o := range outcomes {
		var nl *edictlog.NotLeaderError
		switch {
		case o.err == nil:
			ok = append(ok, o.key)
			want[o.key] = "v" + o.key
		case errors.Is(o.err, edictlog.ErrOutcomeUnknown):
			unknown = append(unknown, o.key)
		case neverTakesEffect(o.err):
			// A transfer's refusal names its target.
			if errors.As(o.err, &nl) && errors.Is(o.err, edictlog.ErrTransferring) {
				require.Equal(t, target.id, nl.Leader, "racing write %s refused by the transfer: %v", o.key, o.err)
			}
			refused = append(refused, o.key)
		default:
			t.Fatalf("racing write %s: unexpected error %v", o.key, o.err)
		}
	}
	t.Logf("racing writes: %d ok, %d refused, %d unknown", len(ok), len(refused), len(unknown))
	require.NotEmpty(t, ok)
	require.NotEmpty(t, refused, "the old leader refused writes after the transfer")

	all := []*netNode{c.node(1), c.node(2), c.node(3)}
	c.checkAllApplied(want, all...)
	for _, k := range refused {
		for _, nn := range all {
			_, found, _ := mustRead(t, nn, edictlog.ReadStale, k)
			require.False(t, found, "write %s was refused, yet node %v applied it", k, nn.id)
		}
	}

	// Transfers in a row each complete, whichever way they go: the
	// target wins the election the old leader's release opens (it must
	// not find itself still granting to the old leader and back off).
	for i := range 8 {
		from := c.waitLeader(10 * time.Second)
		to := c.node(from.id%3 + 1) // round the ring: 1→2→3→1…
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := from.TransferLeadership(tctx, to.id)
		tcancel()
		require.NoError(t, err, "transfer %d, %v→%v", i, from.id, to.id)
		t.Logf("transfer %v→%v in %v", from.id, to.id, time.Since(start))
		require.Equal(t, to.id, c.waitLeader(10*time.Second).id)
		k := fmt.Sprintf("pingpong-%d", i)
		want[k] = "v"
		c.put(k, "v")
	}
	c.checkAllApplied(want, all...)

	// Transfer needs the leader, and a member other than itself.
	l = c.waitLeader(10 * time.Second)
	var nl *edictlog.NotLeaderError
	err := c.others(l.id)[0].TransferLeadership(ctx, l.id)
	require.ErrorAs(t, err, &nl, "transfer on a follower")
	require.ErrorIs(t, err, edictlog.ErrNotLeader)
	require.Error(t, l.TransferLeadership(ctx, l.id), "transfer to itself")
	require.Error(t, l.TransferLeadership(ctx, 9), "transfer to a non-member")
	require.Equal(t, l.id, c.waitLeader(10*time.Second).id, "refused transfers changed nothing")
}

// steadyLease is for tests whose claims need one leader throughout and
// that never wait for a lease to run out: the leader renews 2.7 s before
// its lease ends, so it keeps it through a stall of seconds on a busy
// machine (testTimings' leader loses it after about a quarter second).
func steadyLease(cfg *edictlog.Config) {
	cfg.RoundTrip, cfg.RenewInterval = 25*time.Millisecond, 3*time.Second
}

// Every read level returns a written value: a lease read on the leader,
// a follower read on a follower (linearizable: it sees every write
// acknowledged before it), a stale read after that on the same follower.
// A lease read on a follower names the leader.
func TestNodeReadLevels(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	res := c.put("k", "v1")

	v, found, rr := mustRead(t, l, edictlog.ReadLease, "k")
	require.True(t, found)
	require.Equal(t, "v1", v)
	require.Equal(t, edictlog.ReadLease, rr.Level)
	require.GreaterOrEqual(t, rr.Index, res.Index)

	// A follower read at the leader is served as a lease read.
	_, _, rr = mustRead(t, l, edictlog.ReadFollower, "k")
	require.Equal(t, edictlog.ReadLease, rr.Level)

	_, _, rr = mustRead(t, l, edictlog.ReadStale, "k")
	require.Equal(t, edictlog.ReadStale, rr.Level)
	eventually(t, 10*time.Second, func() error { // 0 while it holds the lease
		if _, _, rr := mustRead(t, l, edictlog.ReadStale, "k"); rr.Staleness != 0 {
			return fmt.Errorf("a stale read at the leader reports staleness %v", rr.Staleness)
		}
		return nil
	})

	for _, f := range c.others(l.id) {
		v, found, rr := mustRead(t, f, edictlog.ReadFollower, "k")
		require.True(t, found, "follower read on %v", f.id)
		require.Equal(t, "v1", v)
		require.Equal(t, edictlog.ReadFollower, rr.Level)
		require.GreaterOrEqual(t, rr.Index, res.Index)

		// The follower has applied the write now: a stale read sees it.
		v, found, rr = mustRead(t, f, edictlog.ReadStale, "k")
		require.True(t, found)
		require.Equal(t, "v1", v)
		require.Equal(t, edictlog.ReadStale, rr.Level)
		require.GreaterOrEqual(t, rr.Index, res.Index)
		require.GreaterOrEqual(t, rr.Staleness, time.Duration(0), "it has heard from the leader")
		require.Less(t, rr.Staleness, 10*time.Second)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, _, err := readKey(ctx, f.Node, edictlog.ReadLease, "k")
		cancel()
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, "lease read on follower %v", f.id)
		require.ErrorIs(t, err, edictlog.ErrNotLeader)
		require.Equal(t, l.id, nl.Leader, "the error names the leader")
	}

	// Follower reads are linearizable: a write acknowledged before the
	// read is seen, at once, on every follower.
	for i := range 5 {
		val := fmt.Sprintf("v%d", i+2)
		res := c.put("k", val)
		for _, f := range c.others(l.id) {
			v, _, rr := mustRead(t, f, edictlog.ReadFollower, "k")
			require.Equal(t, val, v, "follower read on %v after write %d", f.id, res.Index)
			require.GreaterOrEqual(t, rr.Index, res.Index)
		}
	}

	// A key never written is absent at every level.
	_, found, _ = mustRead(t, l, edictlog.ReadLease, "missing")
	require.False(t, found)
}

// Issue stamps edicts that a Fence admits in the order they were issued.
// After a leadership change, an edict the old leader issued before it is
// refused by a Fence that admitted one of the new leader's (ErrStale).
func TestNodeIssueAndFence(t *testing.T) {
	c := newNetCluster(t, 3)
	old := c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	epochs := edict.EpochTable{0: edict.MustMajority(1, 2, 3)}

	fence := edict.NewFence(epochs)
	var issued []edictlog.Edict
	for i := range 5 {
		e, err := old.Issue(ctx, []byte(fmt.Sprintf("order %d", i)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("order %d", i), string(e.Payload))
		require.NoError(t, e.Stamp.Validate(epochs))
		require.NoError(t, fence.Admit(e.Stamp), "edict %d in issue order", i)
		issued = append(issued, e)
	}
	require.ErrorIs(t, fence.Admit(issued[4].Stamp), edict.ErrStale, "a replay is refused")
	require.ErrorIs(t, fence.Admit(issued[0].Stamp), edict.ErrStale, "an older edict is refused")

	// A follower cannot issue: it names the leader.
	f := c.others(old.id)[0]
	eventually(t, 10*time.Second, func() error {
		if s := f.Status(); s.Leader != old.id {
			return fmt.Errorf("follower %v does not know the leader yet", f.id)
		}
		return nil
	})
	_, err := f.Issue(ctx, nil)
	var nl *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, old.id, nl.Leader)

	// The old leader issues one more edict, then leadership moves.
	late, err := old.Issue(ctx, []byte("from the old leader"))
	require.NoError(t, err)
	next := c.others(old.id)[1]
	require.NoError(t, old.TransferLeadership(ctx, next.id))
	require.Equal(t, next.id, c.waitLeader(10*time.Second).id)
	var fresh edictlog.Edict
	eventually(t, 10*time.Second, func() error {
		fresh, err = next.Issue(ctx, []byte("from the new leader"))
		return err
	})
	_, err = old.Issue(ctx, nil)
	require.ErrorAs(t, err, &nl, "the old leader no longer issues")

	cmp, err := late.Stamp.Compare(fresh.Stamp)
	require.NoError(t, err)
	require.Equal(t, -1, cmp, "the new leader's edict is newer")

	// Both a fence that saw the old leader's edicts and a fresh one admit
	// the new leader's edict, and then refuse the old leader's.
	require.NoError(t, fence.Admit(fresh.Stamp))
	require.ErrorIs(t, fence.Admit(late.Stamp), edict.ErrStale)
	fresh2 := edict.NewFence(epochs)
	require.NoError(t, fresh2.Admit(fresh.Stamp))
	require.ErrorIs(t, fresh2.Admit(late.Stamp), edict.ErrStale)
	// In the order they were issued, both pass.
	inOrder := edict.NewFence(epochs)
	require.NoError(t, inOrder.Admit(late.Stamp))
	require.NoError(t, inOrder.Admit(fresh.Stamp))
}

// All three nodes stop and start again from their files, on new ports:
// every acknowledged write is still there. A process restarted after a
// stop that did not wait for its grants to lapse (Stop) grants nothing
// during its quarantine of (1+ρ)·MaxLease, so the restarted cluster
// elects no leader before MaxLease has passed (after Shutdown's clean
// stop it would: TestShutdownRecordsACleanStop).
func TestNodeRestartFromDisk(t *testing.T) {
	c := newNetCluster(t, 3, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 32, 4 })
	want := map[string]string{}
	var last uint64
	for i := range 80 {
		k := fmt.Sprintf("k%02d", i%50) // overwrite some keys
		want[k] = fmt.Sprintf("v%d", i)
		last = c.put(k, want[k]).Index
	}
	// Every node has applied everything and holds a snapshot (they are
	// written in the background), so each restarts from a snapshot and
	// the log after it.
	waitApplied(t, last, c.node(1), c.node(2), c.node(3))
	for _, id := range []edict.ProcessID{1, 2, 3} {
		eventually(t, 10*time.Second, func() error {
			if ms, err := c.node(id).snaps.List(); err != nil || len(ms) == 0 {
				return fmt.Errorf("node %v has no snapshot yet (%v)", id, err)
			}
			return nil
		})
	}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		c.stop(id)
	}

	start := time.Now()
	nets := map[edict.ProcessID]*transport.TCP{}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		nets[id] = c.listen(id)
	}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		c.startWith(id, nets[id], maps.Clone(c.addrs))
	}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		s := c.node(id).Status()
		require.Greater(t, s.Applied, uint64(0), "node %v restored its snapshot", id)
	}
	l := c.waitLeader(20 * time.Second)
	elected := time.Since(start)
	t.Logf("restarted cluster elected %v after %v", l.id, elected)
	require.GreaterOrEqual(t, elected, testMaxLease, "no leader during the restart quarantine")

	for k, v := range want {
		got, found, rr := mustRead(t, l, edictlog.ReadLease, k)
		require.True(t, found, "%q lost in the restart", k)
		require.Equal(t, v, got, "%q", k)
		require.GreaterOrEqual(t, rr.Index, last)
	}
	want["after-restart"] = "yes"
	c.put("after-restart", "yes")
	c.checkAllApplied(want, c.node(1), c.node(2), c.node(3))
}

// A leader that shuts down gracefully (its transport open while Shutdown
// runs) releases its lease and hands over: a new leader is elected at
// once. A killed leader's lease must be waited out. With a long lease the
// two are far apart: a healthy leader's grants always have at least
// RenewInterval/2 left, so a kill costs at least that, while the graceful
// handover takes a few round trips.
func TestNodeShutdownReleasesLease(t *testing.T) {
	long := func(cfg *edictlog.Config) { cfg.RoundTrip, cfg.RenewInterval = 50*time.Millisecond, 2*time.Second }

	failover := func(graceful bool) (old, next edict.ProcessID, took time.Duration) {
		c := newNetCluster(t, 3, long)
		defer c.stopAll()
		l := c.waitLeader(10 * time.Second)
		c.put("k", "v")
		start := time.Now()
		if graceful {
			// Shutdown only: the transport stays open until the new
			// leader is known, so the hand-over is not lost to a
			// connection closed under it.
			delete(c.nodes, l.id)
			t.Cleanup(func() { l.net.Close(); l.store.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			require.NoError(t, l.Shutdown(ctx))
			cancel()
		} else {
			c.kill(l.id)
		}
		n := c.waitLeader(20 * time.Second)
		took = time.Since(start)
		v, _, _ := mustRead(t, n, edictlog.ReadLease, "k")
		require.Equal(t, "v", v)
		return l.id, n.id, took
	}

	old, next, graceful := failover(true)
	t.Logf("graceful shutdown of %v: %v leads after %v", old, next, graceful)
	old, next, killed := failover(false)
	t.Logf("kill of %v: %v leads after %v", old, next, killed)
	require.Less(t, graceful, time.Second, "a graceful shutdown hands over within RenewInterval/2")
	require.Less(t, graceful, killed, "a graceful shutdown is faster than a kill")
}

// Start names the field of the Config that is wrong.
func TestNodeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tr, err := transport.NewTCP(transport.TCPConfig{ID: 1, ClusterID: "cfg", BindAddr: "127.0.0.1:0", Logger: quietLogger()})
	require.NoError(t, err)
	defer tr.Close()
	snaps, err := storage.NewFileSnapshotStore(dir, 2)
	require.NoError(t, err)
	good := func() edictlog.Config {
		return edictlog.Config{ID: 1, Peers: map[edict.ProcessID]string{1: tr.LocalAddr()}, Store: storage.NewMemStore(),
			Snapshots: snaps, Transport: tr, FSM: kvfsm.NewKV(), Logger: quietLogger()}
	}
	cases := []struct {
		name   string
		break_ func(*edictlog.Config)
		field  string
	}{
		{"no id", func(c *edictlog.Config) { c.ID = 0 }, "Config.ID"},
		{"no store", func(c *edictlog.Config) { c.Store = nil }, "Config.Store"},
		{"no snapshots", func(c *edictlog.Config) { c.Snapshots = nil }, "Config.Snapshots"},
		{"no transport", func(c *edictlog.Config) { c.Transport = nil }, "Config.Transport"},
		{"no fsm", func(c *edictlog.Config) { c.FSM = nil }, "Config.FSM"},
		{"transport of another process", func(c *edictlog.Config) { c.ID = 2; c.Peers = map[edict.ProcessID]string{2: "x"} }, "Config.Transport"},
		{"rho", func(c *edictlog.Config) { c.Rho = 0.7 }, "Config.Rho"},
		{"negative round trip", func(c *edictlog.Config) { c.RoundTrip = -time.Second }, "Config.RoundTrip"},
		{"negative batch", func(c *edictlog.Config) { c.MaxBatch = -1 }, "Config.MaxBatch"},
		{"peer 0", func(c *edictlog.Config) { c.Peers = map[edict.ProcessID]string{0: "x", 1: "y"} }, "Config.Peers"},
		{"first start without peers", func(c *edictlog.Config) { c.Peers = nil }, "Config.Peers"},
		{"join without peers", func(c *edictlog.Config) { c.Join = true }, "Config.Join"},
		{"lease shorter than a renewal", func(c *edictlog.Config) { c.MaxLease = time.Millisecond }, "MaxLease"},
		{"two detectors", func(c *edictlog.Config) {
			c.Detector = elect.NewLowestLive(1, []edict.ProcessID{1}, time.Second)
			c.NewDetector = func(uint64, edict.Clock) (elect.Detector, error) { return c.Detector, nil }
		}, "Config.NewDetector"},
		{"detector that fails", func(c *edictlog.Config) {
			c.NewDetector = func(uint64, edict.Clock) (elect.Detector, error) {
				return nil, errors.New("no detector today")
			}
		}, "Config.NewDetector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.break_(&cfg)
			n, err := edictlog.Start(context.Background(), cfg)
			require.Error(t, err)
			require.Nil(t, n)
			require.Contains(t, err.Error(), tc.field)
		})
	}

	// The good config starts: the cases above fail for their own reason.
	n, err := edictlog.Start(context.Background(), good())
	require.NoError(t, err)
	require.NoError(t, n.Shutdown(context.Background()))
}

// A stopped Node answers every call with ErrShutdown, and never as if a
// write might have been taken; a context already cancelled fails a call
// at once, before anything is appended; bad commands and queries are
// reported, not applied.
func TestNodeBadInput(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A context already cancelled: the call returns at once with the
	// context's error, and the write is not appended.
	done, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	for i := range 20 {
		start := time.Now()
		_, err := l.Apply(done, putCmd(t, fmt.Sprintf("cancelled-%d", i), "v"))
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown, "a write with a cancelled context is never submitted")
		require.Less(t, time.Since(start), time.Second)
	}
	start := time.Now()
	_, err := l.Read(done, edictlog.ReadLease, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, l.Barrier(done), context.Canceled)
	_, err = l.Issue(done, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, l.TransferLeadership(done, c.others(l.id)[0].id), context.Canceled)
	require.ErrorIs(t, l.AddLearner(done, 7, "127.0.0.1:1"), context.Canceled)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, l.id, c.waitLeader(10*time.Second).id, "the cancelled transfer did not happen")
	c.checkAllApplied(map[string]string{}, c.node(1), c.node(2), c.node(3))
	for i := range 20 {
		_, found, _ := mustRead(t, l, edictlog.ReadLease, fmt.Sprintf("cancelled-%d", i))
		require.False(t, found, "a write with a cancelled context was applied")
	}

	// A command the state machine cannot decode commits (it is in the
	// log) and the state machine's answer says why it did nothing.
	res, err := l.Apply(ctx, []byte{0xff, 0x00, 0x13})
	require.NoError(t, err)
	resErr, isErr := res.Response.(error)
	require.True(t, isErr, "response %v", res.Response)
	require.ErrorIs(t, resErr, kvfsm.ErrInvalid)
	_, err = l.Read(ctx, edictlog.ReadLease, []byte{0xff})
	require.Error(t, err, "an undecodable query")

	// Membership edicts that make no sense are refused.
	require.Error(t, l.AddLearner(ctx, l.id, "127.0.0.1:1"), "a member is no learner")
	require.Error(t, l.Promote(ctx, 9), "9 is not a learner")
	require.Error(t, l.Remove(ctx, 9), "9 is not a member")
	s := l.Status()
	require.Equal(t, []edict.ProcessID{1, 2, 3}, s.Members)
	require.Empty(t, s.Learners)

	// A stopped node.
	f := c.others(l.id)[0]
	c.stop(f.id)
	for i := range 50 {
		_, err := f.Apply(ctx, putCmd(t, "after-stop", fmt.Sprint(i)))
		require.ErrorIs(t, err, edictlog.ErrShutdown)
		require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown, "a stopped node takes no write")
	}
	_, err = f.Read(ctx, edictlog.ReadStale, nil)
	require.ErrorIs(t, err, edictlog.ErrShutdown)
	require.ErrorIs(t, f.Barrier(ctx), edictlog.ErrShutdown)
	_, err = f.Issue(ctx, nil)
	require.ErrorIs(t, err, edictlog.ErrShutdown)
	require.ErrorIs(t, f.TransferLeadership(ctx, l.id), edictlog.ErrShutdown)
	_, err = f.Snapshot(ctx)
	require.ErrorIs(t, err, edictlog.ErrShutdown)
	require.NoError(t, f.Shutdown(ctx), "a second Shutdown is harmless")

	// An FSM that answers no queries.
	tr, err := transport.NewTCP(transport.TCPConfig{ID: 1, ClusterID: "noq", BindAddr: "127.0.0.1:0", Logger: quietLogger()})
	require.NoError(t, err)
	defer tr.Close()
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	n, err := edictlog.Start(context.Background(), edictlog.Config{ID: 1, Peers: map[edict.ProcessID]string{1: tr.LocalAddr()}, Store: storage.NewMemStore(),
		Snapshots: snaps, Transport: tr, FSM: struct{ fsm.FSM }{kvfsm.NewKV()}, Logger: quietLogger()})
	require.NoError(t, err)
	defer n.Shutdown(context.Background())
	_, err = n.Read(ctx, edictlog.ReadStale, nil)
	require.ErrorIs(t, err, edictlog.ErrNoQuerier)
}

// ReignIndex grows with every reign, at the leader and at every process
// that applies the new reign's entries: the number edictkv reports as
// etcd's raft_term.
func TestNodeReignIndexGrows(t *testing.T) {
	c := newNetCluster(t, 3)
	c.put("a", "1")
	old := c.waitLeader(10 * time.Second)
	first := old.ReignIndex()
	require.NotZero(t, first, "the leader has applied its own reign-start edict")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	target := c.others(old.id)[0]
	require.NoError(t, old.TransferLeadership(ctx, target.id))
	var res edictlog.ApplyResult
	eventually(t, 10*time.Second, func() (err error) {
		res, err = target.Apply(ctx, putCmd(t, "b", "2")) // refused until the reign starts
		return err
	})
	second := target.ReignIndex()
	require.Greater(t, second, first, "a new reign reports a larger number")
	require.Less(t, second, res.Index, "the new reign started before its first write")
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, func() error {
			if got := n.ReignIndex(); got != second {
				return fmt.Errorf("node %v reports reign index %d, want %d", n.id, got, second)
			}
			return nil
		})
	}
}

// countingClock counts the Node's readings of the clock it wraps.
type countingClock struct {
	edict.Clock
	reads atomic.Int64
}

func (c *countingClock) Now() edict.Time {
	c.reads.Add(1)
	return c.Clock.Now()
}

// The Node reads the clock WrapClock returns, reports it as Clock, and
// gives it and the incarnation it bumped to NewDetector; each start's
// incarnation is above the last, and the default clock reads in it.
func TestNodeClockAndDetectorHooks(t *testing.T) {
	var (
		wrapped  *countingClock
		gotInc   uint64
		gotClock edict.Clock
	)
	hooks := func(cfg *edictlog.Config) {
		cfg.WrapClock = func(c edict.Clock) edict.Clock {
			wrapped = &countingClock{Clock: c}
			return wrapped
		}
		cfg.NewDetector = func(inc uint64, c edict.Clock) (elect.Detector, error) {
			gotInc, gotClock = inc, c
			return elect.NewLowestLive(cfg.ID, []edict.ProcessID{cfg.ID}, testMaxLease), nil
		}
	}
	c := newNetCluster(t, 1, hooks)
	n := c.node(1)
	c.put("k", "v") // the detector works: the node elects itself
	require.Same(t, wrapped, n.Clock(), "Clock is the wrapped clock")
	require.Same(t, wrapped, gotClock, "NewDetector is given the wrapped clock")
	require.Positive(t, wrapped.reads.Load(), "the Node reads the wrapped clock")
	require.Equal(t, gotInc, n.Incarnation())
	require.Equal(t, n.Incarnation(), n.Clock().Now().Incarnation, "the default clock reads in this incarnation")
	first := n.Incarnation()

	c.stop(1)
	n = c.restart(1)
	require.Greater(t, n.Incarnation(), first, "a restart bumps the incarnation")
	require.Equal(t, gotInc, n.Incarnation())
	require.Equal(t, n.Incarnation(), n.Clock().Now().Incarnation)
	c.put("k", "v2")
}

// suspendingClock reports a suspend of the host from the moment suspend
// is called, as edict.SystemClock does once it sees BOOTTIME jump ahead
// of the raw clock.
type suspendingClock struct {
	edict.Clock
	at atomic.Pointer[edict.Time]
}

func (c *suspendingClock) suspend() {
	now := c.Clock.Now()
	c.at.Store(&now)
}

func (c *suspendingClock) Suspended(since edict.Time) bool {
	if at := c.at.Load(); at != nil && since.Before(*at) {
		return true
	}
	return c.Clock.Suspended(since)
}

// A write that reaches the loop after the host was suspended is not
// stamped under the lease: the reading the loop takes for it, one for its
// whole batch of proposals, finds the suspend and gives the lease up
// before the write could be stamped under it. The write then waits for
// the next reign (this process, alone, leads it again) and commits there.
func TestNodeSuspendEndsTheLeaseBeforeAWrite(t *testing.T) {
	var clk *suspendingClock
	c := newNetCluster(t, 1, func(cfg *edictlog.Config) {
		cfg.WrapClock = func(in edict.Clock) edict.Clock {
			clk = &suspendingClock{Clock: in}
			return clk
		}
	})
	n := c.node(1)
	c.put("k", "v")
	reign := n.ReignIndex()
	clk.suspend()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Apply(ctx, putCmd(t, "k", "after"))
	if err != nil {
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, "a write after a suspend")
	} else {
		require.Greater(t, n.ReignIndex(), reign, "a write after a suspend committed in the reign it suspended")
		require.Greater(t, res.Index, n.ReignIndex(), "a write after a suspend came before the next reign's start")
	}
	// The loop publishes its lease statistics after the step that refused
	// the write, which may be after Apply returned.
	require.Eventually(t, func() bool { return n.LeaseStats().LostSuspended == 1 }, 5*time.Second, time.Millisecond,
		"the lease was given up for the suspend")
}
