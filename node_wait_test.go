package edictlog_test

import (
	"context"
	"errors"
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
