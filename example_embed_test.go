package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// A lease read is linearizable and answered by the leader alone, from its
// applied state, with no network round trip (under the clock bound ρ). A
// process that does not lead refuses it at once, naming the leader it
// knows, so the caller can go there.
func ExampleNode_Read_lease() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	c.put(ctx, "greeting", "hello")
	leader := waitForLeader(ctx, c.nodes)

	_, err := c.nodes[c.follower(leader)].Read(ctx, edictlog.ReadLease, rangeQuery("greeting"))
	var nl *edictlog.NotLeaderError
	fmt.Println("a follower names the leader:", errors.As(err, &nl) && nl.Leader == leader)

	value, res := read(ctx, c.nodes[leader], edictlog.ReadLease, "greeting")
	fmt.Println(value, res.Level)
	// Output:
	// a follower names the leader: true
	// hello lease
}

// A follower read is linearizable too: the follower asks the leader for
// its commit index (one round trip, answered under the leader's lease, no
// quorum round), waits until it has applied that much, and answers from
// its own state. It sees every write acknowledged before it started.
func ExampleNode_Read_follower() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	c.put(ctx, "greeting", "hello")
	leader := waitForLeader(ctx, c.nodes)

	value, res := read(ctx, c.nodes[c.follower(leader)], edictlog.ReadFollower, "greeting")
	fmt.Println(value, res.Level)
	// Output:
	// hello follower
}

// A stale read answers at once from the process's own applied state,
// leader or not, and says how long since the process last heard from a
// leader: the bound on how old the answer may be. Here the follower is
// first let apply the write (Status.Applied), so the answer is known.
func ExampleNode_Read_stale() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	w := c.put(ctx, "greeting", "hello")
	leader := waitForLeader(ctx, c.nodes)

	follower := c.nodes[c.follower(leader)]
	awaitApplied(ctx, follower, w.Index)
	value, res := read(ctx, follower, edictlog.ReadStale, "greeting")
	fmt.Println(value, res.Level)
	fmt.Println("heard from a leader:", res.Staleness >= 0)
	// Output:
	// hello stale
	// heard from a leader: true
}

// Observe delivers a Node's events without ever waiting for the
// subscriber. Read promptly from a channel with room, it shows each event:
// here, a follower's BecameLeader when leadership is handed to it. With a
// channel of one, and Status read again on each event, it is a wake-up
// that misses no change Status shows.
func ExampleNode_Observe() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	leader := waitForLeader(ctx, c.nodes)
	next := c.follower(leader)

	events := make(chan edictlog.Event, 64)
	obs := c.nodes[next].Observe(events, func(ev edictlog.Event) bool {
		return ev.Kind == edictlog.BecameLeader || ev.Kind == edictlog.SteppedDown
	})
	defer obs.Cancel()
	if err := c.nodes[leader].TransferLeadership(ctx, next); err != nil {
		panic(err)
	}
	select {
	case ev := <-events:
		fmt.Println(ev.Kind, ev.Leader == next)
	case <-ctx.Done():
		panic("no event")
	}
	// Output:
	// became-leader true
}

// A new process joins as a learner: it starts with Join, the leader adds
// it (AddLearner, with its address), and it receives the log without
// counting in quorums. Once it has caught up, Promote makes it a member
// through a new epoch; from then on it is one of four.
func ExampleNode_Promote() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	w := c.put(ctx, "greeting", "hello")

	c.listen(4, "127.0.0.1:0")
	c.start(ctx, 4, true)
	if err := c.nodes[waitForLeader(ctx, c.nodes)].AddLearner(ctx, 4, c.peers[4]); err != nil {
		panic(err)
	}
	awaitApplied(ctx, c.nodes[4], w.Index)
	fmt.Println("learners:", c.nodes[4].Status().Learners)

	if err := c.nodes[waitForLeader(ctx, c.nodes)].Promote(ctx, 4); err != nil {
		panic(err)
	}
	// Promote returns once its edict is applied at the leader; the new
	// member learns its epoch from the log, and the leader's reign in the
	// new epoch answers follower reads once it is ready.
	for ctx.Err() == nil && !(slices.Equal(c.nodes[4].Status().Members, []edict.ProcessID{1, 2, 3, 4}) &&
		c.nodes[waitForLeader(ctx, c.nodes)].Status().Epoch == 1) {
		time.Sleep(10 * time.Millisecond)
	}
	s := c.nodes[4].Status()
	fmt.Println("epoch", s.Epoch, "members:", s.Members)
	value, _ := read(ctx, c.nodes[4], edictlog.ReadFollower, "greeting")
	fmt.Println(value)
	// Output:
	// learners: [p4]
	// epoch 1 members: [p1 p2 p3 p4]
	// hello
}

// A process stopped and started again on the same store keeps what it
// had, takes a new incarnation (so its clock readings still grow), and
// catches up on what the others committed while it was down.
func ExampleNode_Shutdown() {
	c, ctx := newExampleCluster(1, 2, 3)
	defer c.close()
	c.put(ctx, "before", "1")

	down := c.follower(waitForLeader(ctx, c.nodes))
	c.stop(ctx, down)
	w := c.put(ctx, "while-down", "2")

	c.listen(down, c.peers[down]) // the same address: the others know no other
	c.start(ctx, down, false)
	n := c.nodes[down]
	fmt.Println("incarnation:", n.Incarnation())
	awaitApplied(ctx, n, w.Index)
	for _, k := range []string{"before", "while-down"} {
		value, _ := read(ctx, n, edictlog.ReadStale, k)
		fmt.Println(k, value)
	}
	// Output:
	// incarnation: 2
	// before 1
	// while-down 2
}

// exampleCluster runs the examples' processes in one process, as Example
// does: each with its own log folder, snapshot folder and TCP transport on
// 127.0.0.1, and a kvfsm state machine. A process can be stopped and
// started again on the same files.
type exampleCluster struct {
	cancel context.CancelFunc
	dir    string
	logger *slog.Logger
	peers  map[edict.ProcessID]string
	nets   map[edict.ProcessID]*transport.TCP
	stores map[edict.ProcessID]*storage.WALStore
	nodes  map[edict.ProcessID]*edictlog.Node
}

// newExampleCluster starts the processes, and returns with them the
// context the example runs in: 30 s, ended by close.
func newExampleCluster(ids ...edict.ProcessID) (*exampleCluster, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	dir, err := os.MkdirTemp("", "edictlog-example")
	if err != nil {
		panic(err)
	}
	c := &exampleCluster{cancel: cancel, dir: dir, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		peers: map[edict.ProcessID]string{}, nets: map[edict.ProcessID]*transport.TCP{},
		stores: map[edict.ProcessID]*storage.WALStore{}, nodes: map[edict.ProcessID]*edictlog.Node{}}
	// Every transport listens before any node starts, so that every
	// address is known.
	for _, id := range ids {
		c.listen(id, "127.0.0.1:0")
	}
	for _, id := range ids {
		c.start(ctx, id, false)
	}
	return c, ctx
}

// listen opens id's transport on addr and records the address it got.
func (c *exampleCluster) listen(id edict.ProcessID, addr string) {
	t, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "example", BindAddr: addr, Logger: c.logger})
	if err != nil {
		panic(err)
	}
	c.nets[id], c.peers[id] = t, t.LocalAddr()
}

// start opens id's files and starts its node; join makes it a process the
// leader is to add, not a member of the bootstrap epoch.
func (c *exampleCluster) start(ctx context.Context, id edict.ProcessID, join bool) {
	store, err := storage.OpenWAL(filepath.Join(c.dir, fmt.Sprintf("node%d.wal", id)), nil)
	if err != nil {
		panic(err)
	}
	snaps, err := storage.NewFileSnapshotStore(filepath.Join(c.dir, fmt.Sprintf("snap%d", id)), 2)
	if err != nil {
		panic(err)
	}
	n, err := edictlog.Start(ctx, edictlog.Config{ID: id, Peers: c.peers, Join: join, Store: store, Snapshots: snaps,
		Transport: c.nets[id], FSM: kvfsm.NewKV(), Logger: c.logger})
	if err != nil {
		panic(err)
	}
	c.stores[id], c.nodes[id] = store, n
}

// stop shuts id's node down and closes its transport and store.
func (c *exampleCluster) stop(ctx context.Context, id edict.ProcessID) {
	_ = c.nodes[id].Shutdown(ctx)
	c.nets[id].Close()
	c.stores[id].Close()
	delete(c.nodes, id)
}

func (c *exampleCluster) close() {
	for id := range c.nodes {
		c.stop(context.Background(), id)
	}
	c.cancel()
	os.RemoveAll(c.dir)
}

// follower is a running process other than the leader.
func (c *exampleCluster) follower(leader edict.ProcessID) edict.ProcessID {
	for id := range c.nodes {
		if id != leader {
			return id
		}
	}
	panic("no follower")
}

// put writes key at the leader and returns once the leader has applied it.
// A *NotLeaderError is a refusal made before anything was written, so the
// write is safe to try again at the leader the cluster has by then.
func (c *exampleCluster) put(ctx context.Context, key, value string) edictlog.ApplyResult {
	cmd, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: value}})
	if err != nil {
		panic(err)
	}
	for {
		res, err := c.nodes[waitForLeader(ctx, c.nodes)].Apply(ctx, cmd)
		var nl *edictlog.NotLeaderError
		switch {
		case err == nil:
			return res
		case errors.As(err, &nl) && ctx.Err() == nil:
			continue
		default:
			panic(err)
		}
	}
}

func rangeQuery(key string) []byte {
	q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: key})
	if err != nil {
		panic(err)
	}
	return q
}

// read reads key at the level and returns its value.
func read(ctx context.Context, n *edictlog.Node, level edictlog.ReadLevel, key string) (string, edictlog.ReadResult) {
	res, err := n.Read(ctx, level, rangeQuery(key))
	if err != nil {
		panic(err)
	}
	r, err := kvfsm.DecodeResult(res.Data)
	if err != nil || r.Range == nil || len(r.Range.KVs) == 0 {
		return "<missing>", res
	}
	return r.Range.KVs[0].Value, res
}

// awaitApplied waits, woken by the node's Applied events, until the node
// has applied index.
func awaitApplied(ctx context.Context, n *edictlog.Node, index uint64) {
	wake := make(chan edictlog.Event, 1)
	obs := n.Observe(wake, func(ev edictlog.Event) bool { return ev.Kind == edictlog.Applied })
	defer obs.Cancel()
	for n.Status().Applied < index {
		select {
		case <-wake:
		case <-ctx.Done():
			panic(fmt.Sprintf("index %d not applied: %v", index, ctx.Err()))
		}
	}
}
