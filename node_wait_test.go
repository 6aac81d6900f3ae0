package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/require"
)

// newPartialCluster opens the transports of a 3-member cluster and
// starts only node 1: no leader can be elected until another starts.
func newPartialCluster(t *testing.T) (*netCluster, map[edict.ProcessID]*transport.TCP) {
	t.Helper()
	c := &netCluster{t: t, dir: t.TempDir(), logger: quietLogger(), tune: []func(*edictlog.Config){testTimings},
		nodes: map[edict.ProcessID]*netNode{}, addrs: map[edict.ProcessID]string{}}
	t.Cleanup(c.stopAll)
	nets := map[edict.ProcessID]*transport.TCP{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		nets[id] = c.listen(id)
	}
	t.Cleanup(func() {
		for id, tr := range nets {
			if c.nodes[id] == nil {
				tr.Close()
			}
		}
	})
	c.startWith(1, nets[1], maps.Clone(c.addrs))
	return c, nets
}

// While no leader can be elected, Apply, Barrier and the leader-requiring
// reads wait for one within their context, and give up with a
// *NotLeaderError that says the context ended (nothing was written); a
// stale read does not wait.
func TestWaitingCallsGiveUpWithTheirContext(t *testing.T) {
	c, _ := newPartialCluster(t)
	n1 := c.node(1)
	calls := map[string]func(context.Context) error{
		"Apply":   func(ctx context.Context) error { _, err := n1.Apply(ctx, putCmd(t, "k", "v")); return err },
		"Barrier": func(ctx context.Context) error { return n1.Barrier(ctx) },
		"ReadLease": func(ctx context.Context) error {
			_, _, _, err := readKey(ctx, n1.Node, edictlog.ReadLease, "k")
			return err
		},
		"ReadFollower": func(ctx context.Context) error {
			_, _, _, err := readKey(ctx, n1.Node, edictlog.ReadFollower, "k")
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := call(ctx)
		cancel()
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, "%s", name)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s returned before its context ended: %v", name, err)
		require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown, "%s", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, res, err := readKey(ctx, n1.Node, edictlog.ReadStale, "k")
	require.NoError(t, err)
	require.Equal(t, edictlog.ReadStale, res.Level)
	require.NoError(t, ctx.Err(), "a stale read waited")
	st := n1.Status()
	require.Zero(t, st.Commit, "a refused write was committed")
}

// Calls made before any leader exists wait for the election: a follower
// read started then is answered once a leader is elected, and a write is
// applied if this process wins, or refused naming the winner — never
// refused for want of a leader while its context lasts.
func TestWaitingCallsOutlastAnElection(t *testing.T) {
	c, nets := newPartialCluster(t)
	n1 := c.node(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 3)
	go func() {
		_, err := n1.Apply(ctx, putCmd(t, "k", "v"))
		results <- result{"Apply", err}
	}()
	go func() {
		_, _, _, err := readKey(ctx, n1.Node, edictlog.ReadFollower, "k")
		results <- result{"ReadFollower", err}
	}()
	go func() {
		results <- result{"Barrier", n1.Barrier(ctx)}
	}()
	// Nothing can answer them before a quorum runs.
	select {
	case r := <-results:
		t.Fatalf("%s returned before any leader could be elected: %v", r.name, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	c.startWith(2, nets[2], maps.Clone(c.addrs))
	c.startWith(3, nets[3], maps.Clone(c.addrs))
	for range 3 {
		r := <-results
		if r.name == "ReadFollower" {
			require.NoError(t, r.err, "the follower read")
			continue
		}
		if r.err == nil {
			continue
		}
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, r.err, &nl, "%s", r.name)
		require.NotEqual(t, edict.None, nl.Leader, "%s refused naming no leader: %v", r.name, r.err)
		require.NotEqual(t, edict.ProcessID(1), nl.Leader, "%s refused naming its own process: %v", r.name, r.err)
		require.False(t, errors.Is(r.err, context.DeadlineExceeded), "%s", r.name)
	}
}

// At a follower that hears from the leader, a write and a lease read are
// refused at once, naming the leader: the library does not forward.
func TestFollowerRefusesNamingTheLeaderAtOnce(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	c.put("k", "v")
	f := c.others(l.id)[0]
	waitApplied(t, l.Status().Commit, f)
	eventually(t, 10*time.Second, func() error {
		if f.Status().Leader != l.id {
			return errors.New("the follower does not know the leader yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := f.Apply(ctx, putCmd(t, "k", "v2"))
	var nl *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, l.id, nl.Leader)
	require.NoError(t, ctx.Err(), "the refusal waited")
	_, _, _, err = readKey(ctx, f.Node, edictlog.ReadLease, "k")
	require.ErrorAs(t, err, &nl)
	require.Equal(t, l.id, nl.Leader)
	require.NoError(t, ctx.Err(), "the refusal waited")
}

// While no leader can be elected, the membership changes, a transfer and
// Issue wait for one within their context, and give up with a
// *NotLeaderError that says the context ended: nothing was written. A
// snapshot is local and does not wait.
func TestAdminCallsWaitForALeaderWithinTheirContext(t *testing.T) {
	c, _ := newPartialCluster(t)
	n1 := c.node(1)
	calls := map[string]func(context.Context) error{
		"AddLearner":         func(ctx context.Context) error { return n1.AddLearner(ctx, 4, "127.0.0.1:1") },
		"Promote":            func(ctx context.Context) error { return n1.Promote(ctx, 4) },
		"RemoveWith":         func(ctx context.Context) error { return n1.RemoveWith(ctx, 3, edictlog.Force()) },
		"SetAddress":         func(ctx context.Context) error { return n1.SetAddress(ctx, 2, "127.0.0.1:1") },
		"TransferLeadership": func(ctx context.Context) error { return n1.TransferLeadership(ctx, 2) },
		"Issue":              func(ctx context.Context) error { _, err := n1.Issue(ctx, nil); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := call(ctx)
		cancel()
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, "%s", name)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s returned before its context ended: %v", name, err)
		require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown, "%s", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n1.Snapshot(ctx)
	var nl *edictlog.NotLeaderError
	require.False(t, errors.As(err, &nl), "a snapshot needs no leader: %v", err)
	require.NoError(t, ctx.Err(), "a snapshot waited")
	st := n1.Status()
	require.Zero(t, st.Commit, "a refused change was committed")
	require.Equal(t, []edict.ProcessID{1, 2, 3}, st.Members)
	require.Empty(t, st.Learners)
}

// A Promote issued at every member while the cluster has no leader (all
// three just restarted, and a restarted process grants nothing during its
// quarantine) waits for the election: the winner's promotes the learner,
// the others' name the winner — none is refused for want of a leader
// while its context lasts.
func TestPromoteOutlastsAnElection(t *testing.T) {
	c := newNetCluster(t, 3)
	c.put("k", "v")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := c.listen(4)
	c.startWith(4, tr, maps.Clone(c.addrs), func(cfg *edictlog.Config) { cfg.Join = true })
	require.NoError(t, c.waitLeader(10*time.Second).AddLearner(ctx, 4, c.addrs[4]))
	c.checkAllApplied(map[string]string{"k": "v"}, c.node(4))
	for id := edict.ProcessID(1); id <= 3; id++ {
		c.stop(id)
	}
	type result struct {
		id  edict.ProcessID
		err error
	}
	results := make(chan result, 3)
	for id := edict.ProcessID(1); id <= 3; id++ {
		nn := c.restart(id)
		for _, o := range c.nodes {
			if o.Status().IsLeader {
				t.Fatalf("%v leads before the promotes are issued: the test needs an election to wait for", o.id)
			}
		}
		// Force: the quorum check counts a member as live once it
		// answered the new reign or granted it a lease, and the member
		// restarted last may still be in quarantine when the first reign
		// is ready; what is under test is the wait, not the check.
		go func() { results <- result{nn.id, nn.PromoteWith(ctx, 4, edictlog.Force())} }()
	}
	var promoted []edict.ProcessID
	for range 3 {
		r := <-results
		var nl *edictlog.NotLeaderError
		switch {
		case r.err == nil:
			promoted = append(promoted, r.id)
		case errors.As(r.err, &nl):
			require.NotEqual(t, edict.None, nl.Leader, "%v refused naming no leader: %v", r.id, r.err)
			require.NotEqual(t, r.id, nl.Leader, "%v refused naming itself: %v", r.id, r.err)
			require.NotErrorIs(t, r.err, context.DeadlineExceeded, "%v", r.id)
		case errors.Is(r.err, edictlog.ErrNotLearner):
			// Leadership moved here after another's promote committed.
		default:
			t.Fatalf("%v: %v", r.id, r.err)
		}
	}
	require.Len(t, promoted, 1, "exactly one promote, the winner's, is carried out")
	c.waitEpochLeader(1, []edict.ProcessID{1, 2, 3, 4})
}

// At a follower that hears from the leader, every call that needs the
// leader is refused at once, naming it: the library does not forward.
func TestAdminCallsAtAFollowerNameTheLeaderAtOnce(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	c.put("k", "v")
	f := c.others(l.id)[0]
	waitApplied(t, l.Status().Commit, f)
	eventually(t, 10*time.Second, func() error {
		if f.Status().Leader != l.id {
			return errors.New("the follower does not know the leader yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"AddLearner":         func() error { return f.AddLearner(ctx, 4, "127.0.0.1:1") },
		"Promote":            func() error { return f.Promote(ctx, 4) },
		"Remove":             func() error { return f.Remove(ctx, l.id) },
		"SetAddress":         func() error { return f.SetAddress(ctx, l.id, "127.0.0.1:1") },
		"TransferLeadership": func() error { return f.TransferLeadership(ctx, f.id) },
		"Issue":              func() error { _, err := f.Issue(ctx, nil); return err },
	}
	for name, call := range calls {
		err := call()
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, "%s", name)
		require.Equal(t, l.id, nl.Leader, "%s", name)
		require.NoError(t, ctx.Err(), "%s: the refusal waited", name)
	}
	require.Equal(t, []edict.ProcessID{1, 2, 3}, l.Status().Members)
	require.Empty(t, l.Status().Learners)
}

// Changes made at the leader at once wait for each other's commit rather
// than refuse one another (ErrChangeInProgress), and each is tried again
// against the configuration the one before made: of two that add one
// learner, one adds it and the other is refused, ErrAlreadyMember.
func TestChangesWaitForTheChangeInFlight(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	learners := []edict.ProcessID{4, 5, 6, 7, 8, 9}
	errs := make(chan error, len(learners)+1)
	for _, id := range learners {
		go func() { errs <- l.AddLearner(ctx, id, fmt.Sprintf("127.0.0.1:%d", 1000+id)) }()
	}
	go func() { errs <- l.AddLearner(ctx, 4, "127.0.0.1:2004") }()
	var already int
	for range len(learners) + 1 {
		err := <-errs
		if errors.Is(err, edictlog.ErrAlreadyMember) {
			already++
			continue
		}
		require.NoError(t, err)
	}
	require.Equal(t, 1, already, "one of the two that add p4 is refused")
	require.Equal(t, learners, l.Status().Learners)

	// A change that waits for one that cannot commit (the followers are
	// gone; the leader keeps its lease for seconds) gives up with its
	// context: the *MembershipError says both why it waited and that the
	// context ended, and nothing of it was written.
	for _, f := range c.others(l.id) {
		c.kill(f.id)
	}
	first := make(chan error, 1)
	before := l.Status().LastIndex
	go func() {
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer fcancel()
		first <- l.Remove(fctx, 9)
	}()
	eventually(t, 10*time.Second, func() error {
		if l.Status().LastIndex == before {
			return errors.New("the first change is not appended yet")
		}
		return nil
	})
	appended := l.Status().LastIndex
	wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := l.Remove(wctx, 8)
	wcancel()
	var me *edictlog.MembershipError
	require.ErrorAs(t, err, &me)
	require.Equal(t, edict.ProcessID(8), me.Process)
	require.ErrorIs(t, err, edictlog.ErrChangeInProgress)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown)
	require.Equal(t, appended, l.Status().LastIndex, "the change that waited appended nothing")
	// The first was appended: its outcome is unknown, and it is not tried again.
	require.ErrorIs(t, <-first, edictlog.ErrOutcomeUnknown)
}
