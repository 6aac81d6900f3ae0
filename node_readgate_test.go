package edictlog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// putAndPickFollower waits for c's leader, writes k=v through it and
// returns the leader, a follower, and the write's command.
func putAndPickFollower(t *testing.T, ctx context.Context, c *edictlogtest.Cluster) (leader, follower edict.ProcessID, cmd []byte) {
	t.Helper()
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	cmd, err = kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: "k", Value: "v"}})
	require.NoError(t, err)
	_, err = c.Apply(ctx, cmd)
	require.NoError(t, err)
	for _, id := range c.IDs() {
		if id != leader {
			return leader, id, cmd
		}
	}
	t.Fatal("no follower")
	return
}

// Follower reads that arrive while the follower's read index request is
// in flight wait without waking the Node's loop, and leave together in
// the next request once the reply is in: the follower's readings of the
// clock do not grow with their number. 60 reads arriving one per
// millisecond, on a link that takes 40 ms from the leader, take about 13
// readings held so; woken one by one, they would take about 70.
func TestFollowerReadsWaitWithoutWakingTheLoop(t *testing.T) {
	var mu sync.Mutex
	clocks := map[edict.ProcessID]*countingClock{}
	c := edictlogtest.NewCluster(t, edictlogtest.ClusterConfig{
		FSM: func(edict.ProcessID, string) (fsm.FSM, error) { return kvfsm.NewKV(), nil },
		Tune: func(cfg *edictlog.Config) {
			id := cfg.ID
			cfg.WrapClock = func(in edict.Clock) edict.Clock {
				cc := &countingClock{Clock: in}
				mu.Lock()
				clocks[id] = cc
				mu.Unlock()
				return cc
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, f, _ := putAndPickFollower(t, ctx, c)
	c.Network().SetLink(leader, f, edictlogtest.Link{MinDelay: 40 * time.Millisecond, MaxDelay: 40 * time.Millisecond})
	node := c.Node(f)
	q, _ := kvfsm.EncodeQuery(kvfsm.Range{Key: "k"})
	_, err := node.Read(ctx, edictlog.ReadFollower, q)
	require.NoError(t, err)

	mu.Lock()
	clock := clocks[f]
	mu.Unlock()
	before := clock.reads.Load()
	const reads = 60
	var wg sync.WaitGroup
	errs := make([]error, reads)
	for i := range reads {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * time.Millisecond)
			res, err := node.Read(ctx, edictlog.ReadFollower, q)
			if err == nil && string(res.Data) == "" {
				err = context.Canceled
			}
			errs[i] = err
		})
	}
	wg.Wait()
	readings := clock.reads.Load() - before
	for i, err := range errs {
		require.NoError(t, err, "read %d", i)
	}
	t.Logf("%d follower reads, %d readings of the follower's clock", reads, readings)
	require.Less(t, readings, int64(reads/2), "the follower's loop took a reading for most reads")
}

// Config.MaxLeaderWait ends a call's wait for a leader, where the caller's
// context sets no bound: a read and a write at a process cut off from the
// rest return a *NotLeaderError wrapping edictlog.ErrLeaderWait, long
// before their contexts end.
func TestMaxLeaderWaitEndsAWaitForALeader(t *testing.T) {
	c := edictlogtest.NewCluster(t, edictlogtest.ClusterConfig{
		FSM:  func(edict.ProcessID, string) (fsm.FSM, error) { return kvfsm.NewKV(), nil },
		Tune: func(cfg *edictlog.Config) { cfg.MaxLeaderWait = 200 * time.Millisecond },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, f, cmd := putAndPickFollower(t, ctx, c)
	c.Isolate(f)
	node := c.Node(f)
	q, _ := kvfsm.EncodeQuery(kvfsm.Range{Key: "k"})
	for name, call := range map[string]func() error{
		"read": func() error { _, err := node.Read(ctx, edictlog.ReadFollower, q); return err },
		"write": func() error {
			// Refused at once while the leader is still heard from; the
			// wait starts once none is.
			for {
				_, err := node.Apply(ctx, cmd)
				var nl *edictlog.NotLeaderError
				if !errors.As(err, &nl) || nl.Leader == edict.None || errors.Is(err, edictlog.ErrLeaderWait) {
					return err
				}
				time.Sleep(10 * time.Millisecond)
			}
		},
	} {
		err := call()
		var nl *edictlog.NotLeaderError
		require.ErrorAs(t, err, &nl, name)
		require.ErrorIs(t, err, edictlog.ErrLeaderWait, name)
		require.NoError(t, ctx.Err(), "%s: the context ended first", name)
	}
}
