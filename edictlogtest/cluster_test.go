package edictlogtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

func countersCluster(t *testing.T, cfg edictlogtest.ClusterConfig) *edictlogtest.Cluster {
	t.Helper()
	cfg.FSM = func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil }
	return edictlogtest.NewCluster(t, cfg)
}

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// add writes "add hits 1" n times and returns the last result.
func add(t *testing.T, ctx context.Context, c *edictlogtest.Cluster, n int) edictlog.ApplyResult {
	t.Helper()
	var res edictlog.ApplyResult
	for i := range n {
		var err error
		if res, err = c.Apply(ctx, []byte("add hits 1")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	return res
}

// hits reads the counter at process id, once it applied index.
func hits(t *testing.T, ctx context.Context, c *edictlogtest.Cluster, id edict.ProcessID, index uint64) int {
	t.Helper()
	if err := c.WaitApplied(ctx, id, index); err != nil {
		t.Fatal(err)
	}
	r, err := c.Read(ctx, id, edictlog.ReadStale, []byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(r.Data))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClusterOnDisk(t *testing.T) {
	for _, cfg := range []edictlogtest.ClusterConfig{{WAL: true}, {Bolt: true}} {
		name := "bolt"
		if cfg.WAL {
			name = "wal"
		}
		t.Run(name, func(t *testing.T) { clusterOnDisk(t, cfg) })
	}
}

func TestClusterRefusesTwoLogStores(t *testing.T) {
	_, err := edictlogtest.StartCluster(edictlogtest.ClusterConfig{WAL: true, Bolt: true,
		FSM: func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil }})
	if err == nil || !strings.Contains(err.Error(), "WAL and Bolt") {
		t.Fatalf("WAL and Bolt together: %v", err)
	}
}

func clusterOnDisk(t *testing.T, cfg edictlogtest.ClusterConfig) {
	ctx := longCtx(t)
	c := countersCluster(t, cfg)
	add(t, ctx, c, 5)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(leader)
	// A killed process sends nothing more: no lease release, no hand-over.
	sent := map[edict.ProcessID]uint64{}
	for _, id := range c.IDs() {
		sent[id] = c.Network().Stats(leader, id).Sent
	}
	res := add(t, ctx, c, 5)
	for _, id := range c.IDs() {
		if s := c.Network().Stats(leader, id).Sent; s != sent[id] {
			t.Fatalf("killed process %v sent %d messages to %v after Kill", leader, s-sent[id], id)
		}
	}
	if res.Response != int64(10) {
		t.Fatalf("the tenth write answered %v", res.Response)
	}
	c.Restart(leader)
	if got := hits(t, ctx, c, leader, res.Index); got != 10 {
		t.Fatalf("restarted %v reads %d hits, want 10", leader, got)
	}
	// Every process down at once, then up: all from their files.
	for _, id := range c.IDs() {
		c.Kill(id)
	}
	for _, id := range c.IDs() {
		c.Restart(id)
	}
	res = add(t, ctx, c, 1)
	if res.Response != int64(11) {
		t.Fatalf("after a restart of every process the counter answered %v, want 11", res.Response)
	}
}

// A leader cut off from the majority is replaced there; once healed, it
// follows and catches up.
func TestClusterPartitionedLeader(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	add(t, ctx, c, 3)
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rest []edict.ProcessID
	for _, id := range c.IDs() {
		if id != old {
			rest = append(rest, id)
		}
	}
	c.Partition([]edict.ProcessID{old}, rest)
	// Leader reports only a process within its lease: once the majority
	// has a leader, the old one's lease has run out.
	var now edict.ProcessID
	err = poll(ctx, func() bool { now = c.Leader(); return slices.Contains(rest, now) })
	if err != nil {
		t.Fatalf("no leader among %v: %v", rest, err)
	}
	res := add(t, ctx, c, 3)
	if res.Response != int64(6) {
		t.Fatalf("the majority's write answered %v, want 6", res.Response)
	}
	c.Heal()
	if got := hits(t, ctx, c, old, res.Index); got != 6 {
		t.Fatalf("the old leader reads %d after the heal, want 6", got)
	}
}

func poll(ctx context.Context, f func() bool) error {
	for !f() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// A process that missed entries the leader compacted catches up from a
// snapshot, streamed over the in-memory network, perfect or lossy.
func TestClusterSnapshotCatchUp(t *testing.T) {
	for _, link := range []edictlogtest.Link{{}, {Drop: 0.1, MaxDelay: 2 * time.Millisecond}} {
		t.Run(fmt.Sprintf("drop=%v", link.Drop), func(t *testing.T) { snapshotCatchUp(t, link) })
	}
}

func snapshotCatchUp(t *testing.T, link edictlogtest.Link) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{Tune: func(cfg *edictlog.Config) {
		cfg.SnapshotEvery, cfg.TrailingEntries = 16, 4
	}})
	c.Network().SetDefault(link)
	add(t, ctx, c, 2)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var behind edict.ProcessID
	for _, id := range c.Running() {
		if id != leader {
			behind = id
			break
		}
	}
	c.Kill(behind)
	res := add(t, ctx, c, 100)
	c.Restart(behind)
	if got := hits(t, ctx, c, behind, res.Index); got != 102 {
		t.Fatalf("process %v reads %d after catching up, want 102", behind, got)
	}
	var streams uint64
	for _, id := range c.IDs() {
		streams += c.Network().Stats(id, behind).Snapshots
	}
	if streams == 0 {
		t.Fatalf("process %v caught up without a snapshot: the leader did not compact", behind)
	}
}

// Writes commit over a network that loses and delays messages.
func TestClusterLossyNetwork(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	c.Network().SetDefault(edictlogtest.Link{Drop: 0.05, MaxDelay: 2 * time.Millisecond})
	for i := 1; i <= 30; i++ {
		res, err := c.Apply(ctx, []byte("add hits 1"))
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if res.Response != int64(i) {
			t.Fatalf("write %d answered %v", i, res.Response)
		}
	}
	var dropped uint64
	for _, a := range c.IDs() {
		for _, b := range c.IDs() {
			dropped += c.Network().Stats(a, b).Dropped
		}
	}
	if dropped == 0 {
		t.Fatal("the network dropped nothing")
	}
	r, err := c.Read(ctx, edict.None, edictlog.ReadLease, []byte("hits"))
	if err != nil || string(r.Data) != "30" {
		t.Fatalf("lease read: %s, %v", r.Data, err)
	}
}

// admin runs a membership change at whichever process leads, again while
// it is refused before anything was written: not the leader, or another
// change in flight.
func admin(t *testing.T, ctx context.Context, c *edictlogtest.Cluster, what string, f func(*edictlog.Node) error) {
	t.Helper()
	for {
		leader, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := c.Node(leader)
		if n == nil {
			continue
		}
		err = f(n)
		var nl *edictlog.NotLeaderError
		switch {
		case err == nil:
			return
		case errors.As(err, &nl), errors.Is(err, edictlog.ErrChangeInProgress):
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, err)
			}
		default:
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// A new process joins as a learner, receives the log and is promoted; a
// member, the leader itself, is removed; writes go on throughout.
func TestClusterMembership(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	add(t, ctx, c, 4)
	c.Join(4)
	admin(t, ctx, c, "add learner", func(n *edictlog.Node) error { return n.AddLearner(ctx, 4, c.Addr(4)) })
	res := add(t, ctx, c, 1)
	if got := hits(t, ctx, c, 4, res.Index); got != 5 {
		t.Fatalf("the learner reads %d, want 5", got)
	}
	admin(t, ctx, c, "promote", func(n *edictlog.Node) error { return n.Promote(ctx, 4) })
	res = add(t, ctx, c, 1)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin(t, ctx, c, "remove", func(n *edictlog.Node) error { return n.Remove(ctx, leader) })
	res = add(t, ctx, c, 1)
	if res.Response != int64(7) {
		t.Fatalf("the write after the changes answered %v, want 7", res.Response)
	}
	now, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == leader {
		t.Fatalf("removed %v still leads", leader)
	}
	if got := hits(t, ctx, c, 4, res.Index); got != 7 {
		t.Fatalf("the promoted process reads %d, want 7", got)
	}
	if m := c.Node(now).Status().Members; slices.Contains(m, leader) || !slices.Contains(m, 4) {
		t.Fatalf("members %v after promoting 4 and removing %v", m, leader)
	}
}

// A graceful Stop hands leadership over.
func TestClusterStop(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(leader)
	if c.Node(leader) != nil || c.Transport(leader) != nil || slices.Contains(c.Running(), leader) {
		t.Fatal("a stopped process still runs")
	}
	res := add(t, ctx, c, 1)
	if res.Response != int64(1) {
		t.Fatalf("answered %v", res.Response)
	}
	c.Restart(leader)
	if got := hits(t, ctx, c, leader, res.Index); got != 1 {
		t.Fatalf("read %d", got)
	}
}

// A DiskFSM keeps its state in the process's directory, which outlives
// its incarnations: a restart opens it where it was.
func TestClusterDiskFSM(t *testing.T) {
	ctx := longCtx(t)
	c := edictlogtest.NewCluster(t, edictlogtest.ClusterConfig{
		Bolt: true,
		FSM:  func(_ edict.ProcessID, dir string) (fsm.FSM, error) { return kvdisk.Open(dir) },
		Tune: func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 8, 2 },
	})
	put := func(k, v string) edictlog.ApplyResult {
		t.Helper()
		cmd, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: k, Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Apply(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func(id edict.ProcessID, k string, index uint64) string {
		t.Helper()
		if err := c.WaitApplied(ctx, id, index); err != nil {
			t.Fatal(err)
		}
		q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Read(ctx, id, edictlog.ReadStale, q)
		if err != nil {
			t.Fatal(err)
		}
		res, err := kvfsm.DecodeResult(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		if res.Range == nil || len(res.Range.KVs) != 1 {
			return ""
		}
		return res.Range.KVs[0].Value
	}
	for i := range 20 {
		put("k", strconv.Itoa(i))
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(leader)
	res := put("k", "after")
	c.Restart(leader)
	if got := get(leader, "k", res.Index); got != "after" {
		t.Fatalf("restarted %v reads k=%q, want \"after\"", leader, got)
	}
}

// A leader whose messages no longer reach the others, while it still
// hears them (a one-way cut), loses its lease to another.
func TestClusterOneWayCut(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	add(t, ctx, c, 1)
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.IDs() {
		if id != old {
			c.Network().Cut(old, id)
		}
	}
	if err := poll(ctx, func() bool { l := c.Leader(); return l != edict.None && l != old }); err != nil {
		t.Fatalf("%v kept leading with every message it sends lost: %v", old, err)
	}
	res := add(t, ctx, c, 1)
	c.Heal()
	if got := hits(t, ctx, c, old, res.Index); got != 2 {
		t.Fatalf("the old leader reads %d, want 2", got)
	}
}

func TestNewClusterRefusesBadConfig(t *testing.T) {
	for _, cfg := range []edictlogtest.ClusterConfig{
		{},
		{Nodes: -1, FSM: func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil }},
		{FSM: func(edict.ProcessID, string) (fsm.FSM, error) { return nil, errors.New("no FSM today") }},
	} {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			edictlogtest.NewCluster(r, cfg)
		}()
		<-done
		if !r.Failed() {
			t.Fatalf("NewCluster took %+v", cfg)
		}
		if _, err := edictlogtest.StartCluster(cfg); err == nil {
			t.Fatalf("StartCluster took %+v", cfg)
		}
	}
}

// Close leaves none of the kit's goroutines behind: lanes, inboxes.
func TestClusterCloseLeavesNoGoroutines(t *testing.T) {
	ctx := longCtx(t)
	c, err := edictlogtest.StartCluster(edictlogtest.ClusterConfig{
		FSM: func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, []byte("add hits 1")); err != nil {
		t.Fatal(err)
	}
	c.Partition([]edict.ProcessID{1}, []edict.ProcessID{2, 3})
	c.Network().SetDefault(edictlogtest.Link{MaxDelay: time.Millisecond})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var left string
	err = poll(ctx, func() bool {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		left = ""
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "edictlogtest.(*") && !strings.Contains(g, "TestClusterCloseLeavesNoGoroutines") {
				left = g
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("a goroutine of the kit outlived Close:\n%s", left)
	}
}

// A process restarted at a new address serves again: it announces where
// it listens, and the leader makes the address the cluster's.
func TestClusterRestartAtNewAddress(t *testing.T) {
	ctx := longCtx(t)
	c := countersCluster(t, edictlogtest.ClusterConfig{})
	add(t, ctx, c, 3)
	for round := range 2 {
		leader, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The first round moves a follower, the second the leader.
		moved := leader
		if round == 0 {
			for _, id := range c.Running() {
				if id != leader {
					moved = id
					break
				}
			}
		}
		c.Kill(moved)
		c.RestartAt(moved, fmt.Sprintf("mem:%d-moved-%d", moved, round))
		res := add(t, ctx, c, 1)
		if got := hits(t, ctx, c, moved, res.Index); got != 4+round {
			t.Fatalf("process %v at its new address reads %d, want %d", moved, got, 4+round)
		}
		for _, id := range c.Running() {
			if id == moved {
				continue
			}
			if got, _ := c.Transport(id).PeerAddr(moved); got != c.Addr(moved) {
				t.Fatalf("process %v reaches %v at %q, not its new address %q", id, moved, got, c.Addr(moved))
			}
		}
	}
}
