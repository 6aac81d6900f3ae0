package route_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// cluster is n log Nodes on loopback TCP, in memory otherwise; start
// starts the ones not yet running.
type cluster struct {
	t     *testing.T
	nets  map[edict.ProcessID]*transport.TCP
	addrs map[edict.ProcessID]string
	nodes map[edict.ProcessID]*edictlog.Node
}

func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, nets: map[edict.ProcessID]*transport.TCP{}, addrs: map[edict.ProcessID]string{},
		nodes: map[edict.ProcessID]*edictlog.Node{}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 1; i <= n; i++ {
		id := edict.ProcessID(i)
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "route", BindAddr: "127.0.0.1:0", Logger: quiet})
		require.NoError(t, err)
		c.nets[id], c.addrs[id] = tr, tr.LocalAddr()
	}
	t.Cleanup(func() {
		for id, n := range c.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = n.Shutdown(ctx)
			cancel()
			c.nets[id].Close()
		}
	})
	return c
}

func (c *cluster) start(ids ...edict.ProcessID) {
	for _, id := range ids {
		snaps, err := storage.NewMemSnapshotStore(2)
		require.NoError(c.t, err)
		n, err := edictlog.Start(context.Background(), edictlog.Config{ID: id, Peers: c.addrs, Store: storage.NewMemStore(), Snapshots: snaps,
			Transport: c.nets[id], FSM: kvfsm.NewKV(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			RoundTrip: 25 * time.Millisecond, RenewInterval: 300 * time.Millisecond})
		require.NoError(c.t, err)
		c.nodes[id] = n
	}
}

// leader waits for a node that leads, and returns it and a follower.
func (c *cluster) leader() (l, f *edictlog.Node) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l, f = nil, nil
		for _, n := range c.nodes {
			if st := n.Status(); st.IsLeader {
				l = n
			} else if st.Leader != edict.None {
				f = n
			}
		}
		if l != nil && (f != nil || len(c.nodes) == 1) && (f == nil || f.Status().Leader == l.Status().ID) {
			return l, f
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader within 10s")
	return nil, nil
}

func notLeader(leader edict.ProcessID) error {
	return &edictlog.NotLeaderError{Leader: leader, Err: errors.New("test: look again")}
}

func never(t *testing.T) func(context.Context, edict.ProcessID) error {
	return func(context.Context, edict.ProcessID) error {
		t.Error("forwarded, but this process leads")
		return nil
	}
}

// The leader serves, and Do returns serve's answer, errors included; a
// refusal (a *edictlog.NotLeaderError) is tried again, after a short back-off.
func TestDoServesAtTheLeader(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1, 2, 3)
	l, _ := c.leader()
	r := route.New(l, 5*time.Second)
	defer r.Close()

	answer := errors.New("the state machine refused")
	calls := 0
	err := r.Do(context.Background(), false, func(context.Context) error { calls++; return answer }, never(t))
	require.ErrorIs(t, err, answer)
	require.Equal(t, 1, calls)

	calls = 0
	start := time.Now()
	err = r.Do(context.Background(), false, func(context.Context) error {
		calls++
		if calls < 3 {
			return notLeader(l.Status().ID) // refused: a transfer, say, that gives up
		}
		return nil
	}, never(t))
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.Less(t, time.Since(start), time.Second, "two back-offs of 10 and 20ms")
}

// A follower forwards to the leader; a request forwarded to it already
// is refused at once with ErrMisdirected, neither served nor forwarded.
func TestDoForwardsOnce(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1, 2, 3)
	l, f := c.leader()
	r := route.New(f, 5*time.Second)
	defer r.Close()
	var to edict.ProcessID
	err := r.Do(context.Background(), false, func(context.Context) error {
		t.Error("served at a follower")
		return nil
	}, func(_ context.Context, leader edict.ProcessID) error { to = leader; return nil })
	require.NoError(t, err)
	require.Equal(t, l.Status().ID, to)

	start := time.Now()
	err = r.Do(context.Background(), true, func(context.Context) error {
		t.Error("served at a follower")
		return nil
	}, func(context.Context, edict.ProcessID) error {
		t.Error("forwarded a second time")
		return nil
	})
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	require.ErrorIs(t, err, route.ErrMisdirected)
	require.Equal(t, l.Status().ID, nle.Leader)
	// At once: not after the router's wait for a leader (5 s). The bound
	// is that wait's, not a latency: a busy machine keeps it.
	require.Less(t, time.Since(start), 2*time.Second, "refused at once")
}

// A leader that cannot be reached is tried again with a growing back-off,
// not in a busy loop, until the wait ends; then Do says no leader was
// reachable and names the one it knew. A caller's context that ends
// first ends the wait too.
func TestDoGivesUp(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1, 2, 3)
	l, f := c.leader()
	const wait = 400 * time.Millisecond
	r := route.New(f, wait)
	defer r.Close()
	var tries atomic.Int64
	unreachable := func(_ context.Context, leader edict.ProcessID) error {
		tries.Add(1)
		return notLeader(leader)
	}
	start := time.Now()
	err := r.Do(context.Background(), false, nil, unreachable)
	took := time.Since(start)
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	require.ErrorIs(t, err, route.ErrNoLeader)
	require.Equal(t, l.Status().ID, nle.Leader)
	require.GreaterOrEqual(t, took, wait)
	// 10+20+40+80+100+100+... ms: about seven tries in 400ms on a quiet
	// machine; a busy one fires the timers late, so fewer, but at least
	// one retry. Never more: the back-off only grows.
	require.GreaterOrEqual(t, tries.Load(), int64(2), "tried again")
	require.LessOrEqual(t, tries.Load(), int64(12), "no busy loop")

	// A router that would wait far longer than the caller: the wait ends
	// with the caller's context, long before the router's own.
	long := route.New(f, 30*time.Second)
	defer long.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	err = long.Do(ctx, false, nil, unreachable)
	require.ErrorIs(t, err, route.ErrNoLeader)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 10*time.Second)
}

// While no leader is known nothing is tried and no timer runs: the Node's
// leadership events wake the waiting request, which is served as soon as
// a leader is elected. Retry, for reads served here, waits the same way.
func TestDoWaitsForALeader(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1) // alone, it cannot elect
	n := c.nodes[1]
	r := route.New(n, 20*time.Second)
	defer r.Close()
	require.Equal(t, edict.None, n.Status().Leader)

	type result struct {
		err  error
		at   time.Time
		what string
	}
	done := make(chan result, 2)
	go func() {
		err := r.Do(context.Background(), false,
			func(context.Context) error { done <- result{nil, time.Now(), "served"}; return nil },
			func(_ context.Context, leader edict.ProcessID) error {
				done <- result{nil, time.Now(), fmt.Sprintf("forwarded to %v", leader)}
				return nil
			})
		if err != nil {
			done <- result{err, time.Now(), "error"}
		}
	}()
	retried := make(chan error, 1)
	var reads atomic.Int64
	go func() {
		retried <- r.Retry(context.Background(), func(context.Context) error {
			reads.Add(1)
			if n.Status().Leader == edict.None {
				return notLeader(edict.None)
			}
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case res := <-done:
		t.Fatalf("routed with no leader known: %+v", res)
	default:
	}

	c.start(2, 3)
	known := time.Time{}
	deadline := time.Now().Add(10 * time.Second)
	for known.IsZero() && time.Now().Before(deadline) {
		if n.Status().Leader != edict.None {
			known = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	require.False(t, known.IsZero(), "node 1 learned of no leader")
	res := <-done
	require.NoError(t, res.err)
	t.Logf("%s %v after the leader was known", res.what, res.at.Sub(known))
	require.Less(t, res.at.Sub(known), time.Second, "the leadership event woke the request")
	require.NoError(t, <-retried)
	require.Less(t, reads.Load(), int64(200), "Retry backs off between refusals")
}

// Close ends the Router's goroutine and subscription; twice is fine.
func TestCloseLeavesNothing(t *testing.T) {
	c := newCluster(t, 1)
	c.start(1)
	c.leader()
	base := runtime.NumGoroutine()
	var rs []*route.Router
	for range 20 {
		rs = append(rs, route.New(c.nodes[1], time.Second))
	}
	require.GreaterOrEqual(t, runtime.NumGoroutine(), base+20)
	for _, r := range rs {
		r.Close()
		r.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), base)
}
