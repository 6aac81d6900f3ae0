package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/require"
)

// netCluster runs Nodes in one process the way a deployment does: each
// with its own TCP transport on 127.0.0.1 and its own log store and
// snapshot directory, which survive a node's stop so it can be started
// again from disk. Nodes can be stopped gracefully, killed, restarted on a
// new port, and added.
//
// Set EDICT_TEST_LOG=1 to see the Nodes' warnings on stderr.
type netCluster struct {
	t      testing.TB
	dir    string
	logger *slog.Logger
	tune   []func(*edictlog.Config)
	// wal tunes the nodes' WALStores (zero: the defaults).
	wal storage.WALOptions
	// nodes are the running nodes; addrs the newest address of every node
	// ever started.
	nodes map[edict.ProcessID]*netNode
	addrs map[edict.ProcessID]string
}

type netNode struct {
	id    edict.ProcessID
	net   *transport.TCP
	store *storage.WALStore
	snaps *storage.FileSnapshotStore
	kv    *kvfsm.KV
	*edictlog.Node
	cfg edictlog.Config
}

// quietLogger discards, unless EDICT_TEST_LOG is set.
func quietLogger() *slog.Logger {
	if os.Getenv("EDICT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testTimings are lease timings relaxed for a shared, noisy machine: a
// leader starved of CPU for a few tens of milliseconds keeps its lease.
// MaxLease is 2·(RoundTrip+RenewInterval) = 650ms.
func testTimings(cfg *edictlog.Config) {
	cfg.RoundTrip, cfg.RenewInterval = 25*time.Millisecond, 300*time.Millisecond
}

// newNetCluster starts nodes 1..n, bootstrapping epoch 0 with all of them.
func newNetCluster(t testing.TB, n int, tune ...func(*edictlog.Config)) *netCluster {
	t.Helper()
	return newNetClusterWAL(t, n, storage.WALOptions{}, tune...)
}

// newNetClusterWAL is newNetCluster with the nodes' WALStores tuned.
func newNetClusterWAL(t testing.TB, n int, wal storage.WALOptions, tune ...func(*edictlog.Config)) *netCluster {
	t.Helper()
	c := &netCluster{t: t, dir: t.TempDir(), logger: quietLogger(), tune: append([]func(*edictlog.Config){testTimings}, tune...),
		wal: wal, nodes: map[edict.ProcessID]*netNode{}, addrs: map[edict.ProcessID]string{}}
	t.Cleanup(c.stopAll)
	nets := map[edict.ProcessID]*transport.TCP{}
	for i := 1; i <= n; i++ {
		id := edict.ProcessID(i)
		nets[id] = c.listen(id)
	}
	peers := maps.Clone(c.addrs)
	for i := 1; i <= n; i++ {
		id := edict.ProcessID(i)
		c.startWith(id, nets[id], peers)
	}
	return c
}

// listen opens a transport for id on a free port and records its address.
func (c *netCluster) listen(id edict.ProcessID) *transport.TCP {
	c.t.Helper()
	tr, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "nodetest", BindAddr: "127.0.0.1:0", Logger: c.logger})
	require.NoError(c.t, err)
	c.addrs[id] = tr.LocalAddr()
	return tr
}

// startWith starts id's Node on tr from id's files (empty on a first
// start) with the given Peers.
func (c *netCluster) startWith(id edict.ProcessID, tr *transport.TCP, peers map[edict.ProcessID]string, tune ...func(*edictlog.Config)) *netNode {
	c.t.Helper()
	store, err := storage.OpenWAL(c.walDir(id), &c.wal)
	require.NoError(c.t, err)
	snaps, err := storage.NewFileSnapshotStore(filepath.Join(c.dir, fmt.Sprintf("snap%d", id)), 2)
	require.NoError(c.t, err)
	kv := kvfsm.NewKV()
	cfg := edictlog.Config{ID: id, Peers: peers, Store: store, Snapshots: snaps, Transport: tr, FSM: kv, Logger: c.logger}
	for _, f := range append(slices.Clone(c.tune), tune...) {
		f(&cfg)
	}
	n, err := edictlog.Start(context.Background(), cfg)
	if err != nil {
		tr.Close()
		store.Close()
		require.NoError(c.t, err, "start node %v", id)
	}
	nn := &netNode{id: id, net: tr, store: store, snaps: snaps, kv: kv, Node: n, cfg: cfg}
	c.nodes[id] = nn
	return nn
}

// walDir is the folder of id's WALStore.
func (c *netCluster) walDir(id edict.ProcessID) string {
	return filepath.Join(c.dir, fmt.Sprintf("n%d.wal", id))
}

// restart starts a stopped node again from its files, on a new port; the
// running nodes learn the new address.
func (c *netCluster) restart(id edict.ProcessID, tune ...func(*edictlog.Config)) *netNode {
	c.t.Helper()
	require.NotContains(c.t, c.nodes, id, "node %v is running", id)
	tr := c.listen(id)
	for _, o := range c.nodes {
		o.net.AddPeer(id, c.addrs[id])
	}
	return c.startWith(id, tr, maps.Clone(c.addrs), tune...)
}

// stop stops a node gracefully: Stop (which releases a lease and hands
// leadership over) while its transport is still open, then the transport
// and the store. Not the clean stop's wait for the node's grants to lapse
// (Shutdown, TestShutdownRecordsACleanStop), which would cost up to a
// lease per stop: the node's next start is quarantined.
func (c *netCluster) stop(id edict.ProcessID) {
	c.t.Helper()
	nn := c.nodes[id]
	require.NotNil(c.t, nn, "node %v is not running", id)
	delete(c.nodes, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, nn.Stop(ctx))
	nn.net.Close()
	require.NoError(c.t, nn.store.Close())
}

// kill stops a node as a crash would look to the others: its network
// goes first, so it cannot even release its lease.
func (c *netCluster) kill(id edict.ProcessID) {
	c.t.Helper()
	nn := c.nodes[id]
	require.NotNil(c.t, nn, "node %v is not running", id)
	delete(c.nodes, id)
	nn.net.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, nn.Shutdown(ctx))
	require.NoError(c.t, nn.store.Close())
}

func (c *netCluster) stopAll() {
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		nn := c.nodes[id]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = nn.Stop(ctx)
		cancel()
		nn.net.Close()
		_ = nn.store.Close()
	}
	c.nodes = map[edict.ProcessID]*netNode{}
}

// node returns a running node.
func (c *netCluster) node(id edict.ProcessID) *netNode {
	c.t.Helper()
	nn := c.nodes[id]
	require.NotNil(c.t, nn, "node %v is not running", id)
	return nn
}

// followers are the running nodes other than id, in id order.
func (c *netCluster) others(id edict.ProcessID) []*netNode {
	var out []*netNode
	for _, o := range slices.Sorted(maps.Keys(c.nodes)) {
		if o != id {
			out = append(out, c.nodes[o])
		}
	}
	return out
}

// waitLeader waits for a running node that leads a ready reign.
func (c *netCluster) waitLeader(within time.Duration) *netNode {
	c.t.Helper()
	var found *netNode
	eventually(c.t, within, func() error {
		for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
			if c.nodes[id].Status().IsLeader {
				found = c.nodes[id]
				return nil
			}
		}
		return errors.New("no running node leads")
	})
	return found
}

// eventually polls cond every 10ms until it returns nil, and fails the
// test with cond's last error after within.
func eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retriable reports whether a write failed in a way that says only "not
// here, not now": no leader, a transfer or an epoch change in progress, or
// an unknown outcome (the writes these tests retry are idempotent).
func retriable(err error) bool {
	var nl *edictlog.NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, edictlog.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded)
}

// apply commits cmd through whichever node leads, retrying while
// leadership moves, and returns the result of the attempt that committed.
func (c *netCluster) apply(cmd []byte) edictlog.ApplyResult {
	c.t.Helper()
	res, err := c.tryApply(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

// applyConcurrently runs writers goroutines, each applying writes
// commands cmd(w, i) in order through tryApply (so they share batches),
// and returns every error, each naming its writer and write; a writer
// stops at its first. The test must not start or stop nodes meanwhile.
func (c *netCluster) applyConcurrently(writers, writes int, cmd func(w, i int) kvfsm.Command) error {
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				b, err := kvfsm.EncodeCommand(cmd(w, i))
				if err == nil {
					_, err = c.tryApply(b) // through the leader, whichever it is
				}
				if err != nil {
					errs[w] = fmt.Errorf("writer %d, write %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tryApply is apply for other goroutines than the test's: it returns the
// error instead of failing the test. It only reads c.nodes, so the test
// must not start or stop nodes meanwhile.
func (c *netCluster) tryApply(cmd []byte) (edictlog.ApplyResult, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var l *netNode
		for l == nil {
			for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
				if c.nodes[id].Status().IsLeader {
					l = c.nodes[id]
				}
			}
			if l == nil {
				if time.Now().After(deadline) {
					return edictlog.ApplyResult{}, errors.New("no leader within 20s")
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res, err := l.Apply(ctx, cmd)
		cancel()
		if err == nil {
			return res, nil
		}
		if !retriable(err) || time.Now().After(deadline) {
			return res, fmt.Errorf("write through %v: %w", l.id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// put writes key=value through the leader (see apply).
func (c *netCluster) put(key, value string) edictlog.ApplyResult {
	c.t.Helper()
	return c.apply(putCmd(c.t, key, value))
}

// barrier commits a no-op through the leader and returns its index: every
// write acknowledged before it is at or below it.
func (c *netCluster) barrier() uint64 {
	c.t.Helper()
	return c.apply(nil).Index
}

// waitApplied waits until every given node has applied index.
func waitApplied(t testing.TB, index uint64, nodes ...*netNode) {
	t.Helper()
	for _, nn := range nodes {
		eventually(t, 20*time.Second, func() error {
			if s := nn.Status(); s.Applied < index {
				return fmt.Errorf("node %v applied %d, want %d", nn.id, s.Applied, index)
			}
			return nil
		})
	}
}

func putCmd(t testing.TB, key, value string) []byte {
	t.Helper()
	b, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: value}})
	require.NoError(t, err)
	return b
}

// readKey reads one key at level on n.
func readKey(ctx context.Context, n *edictlog.Node, level edictlog.ReadLevel, key string) (value string, found bool, res edictlog.ReadResult, err error) {
	q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: key})
	if err != nil {
		return "", false, res, err
	}
	res, err = n.Read(ctx, level, q)
	if err != nil {
		return "", false, res, err
	}
	r, err := kvfsm.DecodeResult(res.Data)
	if err != nil {
		return "", false, res, err
	}
	if r.Range == nil {
		return "", false, res, fmt.Errorf("read of %q: no range result", key)
	}
	if len(r.Range.KVs) == 0 {
		return "", false, res, nil
	}
	return r.Range.KVs[0].Value, true, res, nil
}

// mustRead reads key at level on n and fails the test on an error.
func mustRead(t testing.TB, n *netNode, level edictlog.ReadLevel, key string) (string, bool, edictlog.ReadResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, ok, res, err := readKey(ctx, n.Node, level, key)
	require.NoError(t, err, "%v read of %q on node %v", level, key, n.id)
	return v, ok, res
}

// dump reads the whole key space of n's state machine at ReadStale.
func dump(t testing.TB, n *netNode) []kvfsm.KeyValue {
	t.Helper()
	q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: "\x00", RangeEnd: "\x00"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.Read(ctx, edictlog.ReadStale, q)
	require.NoError(t, err)
	r, err := kvfsm.DecodeResult(res.Data)
	require.NoError(t, err)
	require.NotNil(t, r.Range)
	return r.Range.KVs
}

// checkAllApplied checks that every node in nodes holds every key of want
// with its value, after a barrier through the leader.
func (c *netCluster) checkAllApplied(want map[string]string, nodes ...*netNode) {
	c.t.Helper()
	idx := c.barrier()
	waitApplied(c.t, idx, nodes...)
	for _, nn := range nodes {
		for k, v := range want {
			got, ok, _ := mustRead(c.t, nn, edictlog.ReadStale, k)
			require.True(c.t, ok, "node %v lacks %q", nn.id, k)
			require.Equal(c.t, v, got, "node %v: %q", nn.id, k)
		}
	}
}
