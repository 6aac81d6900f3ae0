package edictlog_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/stretchr/testify/require"
)

// consistency checks, from inside an observer's filter — which runs on the
// Node's goroutine as the event is sent — that the Node's Status already
// shows what the event announces. Were events sent before the status of
// their step is published, the first Applied event would find Status's
// applied index behind it.
type consistency struct {
	mu       sync.Mutex
	problems []string
	checked  map[edictlog.EventKind]int
}

func (c *consistency) check(n *edictlog.Node, ev edictlog.Event) {
	st := n.Status()
	var bad string
	switch ev.Kind {
	case edictlog.Applied:
		if st.Applied < ev.Index {
			bad = fmt.Sprintf("Status().Applied %d behind the Applied event's %d", st.Applied, ev.Index)
		}
	case edictlog.BecameLeader:
		if !st.IsLeader || !st.Reign.Equal(ev.Reign) {
			bad = fmt.Sprintf("BecameLeader of reign %v, but Status says leader=%t reign %v", ev.Reign, st.IsLeader, st.Reign)
		}
	case edictlog.SteppedDown:
		if st.IsLeader {
			bad = "SteppedDown, but Status still leads"
		}
	case edictlog.LeaderChanged:
		if st.Leader != ev.Leader {
			bad = fmt.Sprintf("LeaderChanged to %v, but Status names %v", ev.Leader, st.Leader)
		}
	case edictlog.EpochChanged:
		if st.Epoch < ev.Epoch {
			bad = fmt.Sprintf("EpochChanged to %d, but Status is in %d", ev.Epoch, st.Epoch)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked == nil {
		c.checked = map[edictlog.EventKind]int{}
	}
	c.checked[ev.Kind]++
	if bad != "" {
		c.problems = append(c.problems, fmt.Sprintf("node %v, %v: %s", st.ID, ev.Kind, bad))
	}
}

func (c *consistency) requireClean(t *testing.T, kinds ...edictlog.EventKind) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.problems)
	for _, k := range kinds {
		require.NotZero(t, c.checked[k], "no %v event was checked", k)
	}
}

// drain takes what ch holds now.
func drain(ch <-chan edictlog.Event) []edictlog.Event {
	var out []edictlog.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// waitEvent waits for an event on ch that match accepts, and returns it;
// the events it passes over are appended to seen.
func waitEvent(t *testing.T, ch <-chan edictlog.Event, within time.Duration, what string, match func(edictlog.Event) bool, seen *[]edictlog.Event) edictlog.Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev := <-ch:
			if seen != nil {
				*seen = append(*seen, ev)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// A transfer, as every node's observers see it: the target announces
// BecameLeader, the old leader SteppedDown and then the target as its
// leader, the third node the target; writes are announced as Applied
// events with rising indexes; and at each event Status already shows it.
func TestNodeObserveLeadershipAndApplied(t *testing.T) {
	c := newNetCluster(t, 3)
	c.put("warm", "up")
	old := c.waitLeader(10 * time.Second)
	target := c.others(old.id)[0]
	third := c.others(old.id)[1]

	var cons consistency
	chans := map[edict.ProcessID]chan edictlog.Event{}
	for _, nn := range []*netNode{old, target, third} {
		ch := make(chan edictlog.Event, 4096)
		chans[nn.id] = ch
		n := nn.Node
		obs := nn.Observe(ch, func(ev edictlog.Event) bool { cons.check(n, ev); return true })
		t.Cleanup(obs.Cancel)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, old.TransferLeadership(ctx, target.id))
	var seen []edictlog.Event
	became := waitEvent(t, chans[target.id], 10*time.Second, "BecameLeader at the target",
		func(ev edictlog.Event) bool { return ev.Kind == edictlog.BecameLeader }, &seen)
	require.Equal(t, target.id, became.Leader)
	waitEvent(t, chans[old.id], 10*time.Second, "SteppedDown at the old leader",
		func(ev edictlog.Event) bool { return ev.Kind == edictlog.SteppedDown }, nil)
	waitEvent(t, chans[old.id], 10*time.Second, "the target as the old leader's leader",
		func(ev edictlog.Event) bool { return ev.Kind == edictlog.LeaderChanged && ev.Leader == target.id }, nil)
	waitEvent(t, chans[third.id], 10*time.Second, "the target as the third node's leader",
		func(ev edictlog.Event) bool { return ev.Kind == edictlog.LeaderChanged && ev.Leader == target.id }, nil)

	// Writes: every node announces Applied, its indexes rising, up to the
	// last write's index.
	var last uint64
	for i := range 20 {
		last = c.put(fmt.Sprintf("k%02d", i), "v").Index
	}
	for id, ch := range chans {
		prev := uint64(0)
		waitEvent(t, ch, 10*time.Second, fmt.Sprintf("node %v's Applied event for index %d", id, last), func(ev edictlog.Event) bool {
			if ev.Kind != edictlog.Applied {
				return false
			}
			require.Greater(t, ev.Index, prev, "node %v: Applied indexes must rise", id)
			prev = ev.Index
			return ev.Index >= last
		}, nil)
	}
	cons.requireClean(t, edictlog.Applied, edictlog.BecameLeader, edictlog.SteppedDown, edictlog.LeaderChanged)
}

// The filter chooses the events; an observer that does not keep up loses
// events without slowing the Node, and each one lost is counted; Cancel
// stops the sending for good, so that the channel may be closed.
func TestNodeObserveFilterDropCancel(t *testing.T) {
	c := newNetCluster(t, 1)
	c.put("warm", "up")
	n := c.node(1)

	// Only Applied events, into a channel no one reads.
	var offered atomic.Uint64
	full := make(chan edictlog.Event, 1)
	slow := n.Observe(full, func(ev edictlog.Event) bool {
		if ev.Kind != edictlog.Applied {
			return false
		}
		offered.Add(1)
		return true
	})
	// Every event, into a channel read as they come.
	all := make(chan edictlog.Event, 1024)
	fast := n.Observe(all, nil)
	for i := range 30 {
		c.put(fmt.Sprintf("k%02d", i), "v") // one at a time: 30 steps, 30 Applied events at least
	}
	eventually(t, 5*time.Second, func() error {
		if slow.Sent()+slow.Dropped() < 30 {
			return fmt.Errorf("the slow observer was offered %d+%d events", slow.Sent(), slow.Dropped())
		}
		return nil
	})
	require.Equal(t, uint64(1), slow.Sent(), "the full channel took one event")
	require.Equal(t, offered.Load(), slow.Sent()+slow.Dropped(), "every event the filter took was sent or counted dropped")
	require.Len(t, full, 1)
	require.Equal(t, edictlog.Applied, (<-full).Kind)

	got := drain(all)
	require.Zero(t, fast.Dropped())
	require.Equal(t, fast.Sent(), uint64(len(got)))
	require.True(t, slices.ContainsFunc(got, func(ev edictlog.Event) bool { return ev.Kind == edictlog.Applied }))

	// Once Cancel returns nothing is sent: closing the channels would
	// make a later send panic.
	slow.Cancel()
	slow.Cancel() // twice is fine
	fast.Cancel()
	close(full)
	close(all)
	sent, dropped := slow.Sent(), slow.Dropped()
	for i := range 10 {
		c.put(fmt.Sprintf("after-cancel-%02d", i), "v")
	}
	require.Equal(t, sent, slow.Sent())
	require.Equal(t, dropped, slow.Dropped())
}

// A snapshot taken on demand is announced once it is durable, with its
// index.
func TestNodeObserveSnapshotTaken(t *testing.T) {
	c := newNetCluster(t, 1, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 1<<20, 4 })
	n := c.node(1)
	ch := make(chan edictlog.Event, 16)
	obs := n.Observe(ch, func(ev edictlog.Event) bool { return ev.Kind == edictlog.SnapshotTaken })
	defer obs.Cancel()
	for i := range 10 {
		c.put(fmt.Sprintf("k%02d", i), "v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := n.Snapshot(ctx)
	require.NoError(t, err)
	metas, err := n.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	require.Equal(t, metas[0].Index, idx, "Snapshot returns the index it covers")
	ev := waitEvent(t, ch, 10*time.Second, "SnapshotTaken", func(edictlog.Event) bool { return true }, nil)
	require.Equal(t, metas[0].Index, ev.Index)
}

// Membership changes are announced: removing a member ends the epoch,
// and the others announce the new configuration and the new epoch; the
// Membership an event carries is the observer's own copy.
func TestNodeObserveMembership(t *testing.T) {
	c := newNetCluster(t, 3)
	c.put("warm", "up")
	l := c.waitLeader(10 * time.Second)
	gone := c.others(l.id)[1]
	stay := c.others(l.id)[0]
	var cons consistency
	chans := map[edict.ProcessID]chan edictlog.Event{}
	for _, nn := range []*netNode{l, stay} {
		ch := make(chan edictlog.Event, 4096)
		chans[nn.id] = ch
		n := nn.Node
		obs := nn.Observe(ch, func(ev edictlog.Event) bool {
			cons.check(n, ev)
			return ev.Kind == edictlog.ConfigChanged || ev.Kind == edictlog.EpochChanged
		})
		t.Cleanup(obs.Cancel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, l.Remove(ctx, gone.id))
	wantMembers := []edict.ProcessID{l.id, stay.id}
	slices.Sort(wantMembers)
	for id, ch := range chans {
		cfg := waitEvent(t, ch, 20*time.Second, fmt.Sprintf("node %v's ConfigChanged for epoch 1", id), func(ev edictlog.Event) bool {
			return ev.Kind == edictlog.ConfigChanged && ev.Epoch == 1
		}, nil)
		require.NotNil(t, cfg.Membership)
		require.Equal(t, wantMembers, cfg.Membership.Config.Members)
		cfg.Membership.Config.Members[0] = 99 // the observer's own copy
		ep := waitEvent(t, ch, 20*time.Second, fmt.Sprintf("node %v's EpochChanged to 1", id), func(ev edictlog.Event) bool {
			return ev.Kind == edictlog.EpochChanged && ev.Epoch == 1
		}, nil)
		require.Equal(t, uint64(1), ep.Epoch)
		require.Equal(t, wantMembers, c.node(id).Status().Members)
	}
	cons.requireClean(t, edictlog.EpochChanged)
}

// Stopped is the last event; a Node that has stopped sends nothing more,
// and Observe on it sends Stopped at once. Observers hold no goroutine: a
// stopped Node with observers never cancelled leaves none behind.
func TestNodeObserveStopped(t *testing.T) {
	base := runtime.NumGoroutine()
	c := newNetCluster(t, 1)
	c.put("warm", "up")
	n := c.node(1)
	ch := make(chan edictlog.Event, 4096)
	var uncancelled []*edictlog.Observer
	for range 100 {
		uncancelled = append(uncancelled, n.Observe(make(chan edictlog.Event, 1), nil))
	}
	obs := n.Observe(ch, nil)
	c.put("k", "v")
	c.stopAll()

	got := drain(ch)
	require.NotEmpty(t, got)
	lastEv := got[len(got)-1]
	require.Equal(t, edictlog.Stopped, lastEv.Kind, "the last event, of %v", got)
	require.Equal(t, "shut down", lastEv.Reason)
	stops := 0
	for _, ev := range got {
		if ev.Kind == edictlog.Stopped {
			stops++
		}
	}
	require.Equal(t, 1, stops, "Stopped is sent once")
	require.Equal(t, uint64(len(got)), obs.Sent())

	late := make(chan edictlog.Event, 1)
	lateObs := n.Observe(late, nil)
	require.Equal(t, edictlog.Stopped, (<-late).Kind, "Observe on a stopped Node sends Stopped")
	require.Equal(t, uint64(1), lateObs.Sent())
	// A full channel loses even Stopped, and counts it.
	require.Equal(t, uint64(1), uncancelled[0].Sent(), "a channel of one took one event")
	require.NotZero(t, uncancelled[0].Dropped(), "and the rest, Stopped included, were dropped")

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines after the stop, %d before the start:\n%s", g, base, strings.TrimSpace(string(buf)))
	}
}
