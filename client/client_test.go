package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/client"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/require"
)

var _ client.Endpoint = (*edictlog.Node)(nil)

// ledger counts how many times each command was applied: a write applied
// twice shows as a count of 2. Query answers a command's count.
type ledger struct {
	mu     sync.Mutex
	counts map[string]int
}

func newLedger() *ledger { return &ledger{counts: map[string]int{}} }

func (l *ledger) Apply(e fsm.Entry) any {
	if len(e.Data) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[string(e.Data)]++
	return l.counts[string(e.Data)]
}

func (l *ledger) Query(q []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return []byte(strconv.Itoa(l.counts[string(q)])), nil
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts)
}

func (l *ledger) Snapshot() (fsm.Snapshot, error) { return ledgerSnap(l.snapshot()), nil }

func (l *ledger) Restore(r io.Reader) error {
	m := map[string]int{}
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	l.mu.Lock()
	l.counts = m
	l.mu.Unlock()
	return nil
}

type ledgerSnap map[string]int

func (s ledgerSnap) Persist(w io.Writer) error { return json.NewEncoder(w).Encode(map[string]int(s)) }
func (ledgerSnap) Release()                    {}

// member is a process of the test cluster; its handle is the endpoint
// the client holds, as an embedder's RPC stub would be: it reaches the
// member's current Node, and reports ErrNotSent while none runs.
type member struct {
	id     edict.ProcessID
	net    *transport.TCP
	ledger *ledger
	node   atomic.Pointer[edictlog.Node]
	killed bool
}

func (m *member) Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error) {
	n := m.node.Load()
	if n == nil {
		return edictlog.ApplyResult{}, fmt.Errorf("member %v: %w", m.id, client.ErrNotSent)
	}
	return n.Apply(ctx, cmd)
}

func (m *member) Read(ctx context.Context, level edictlog.ReadLevel, q []byte) (edictlog.ReadResult, error) {
	n := m.node.Load()
	if n == nil {
		return edictlog.ReadResult{}, fmt.Errorf("member %v: %w", m.id, client.ErrNotSent)
	}
	return n.Read(ctx, level, q)
}

type cluster struct {
	t       *testing.T
	members map[edict.ProcessID]*member
	addrs   map[edict.ProcessID]string
}

// newCluster opens the transports of n members on loopback and starts
// the Nodes of those in start (all if none), on in-memory stores.
func newCluster(t *testing.T, n int, start ...edict.ProcessID) *cluster {
	c := &cluster{t: t, members: map[edict.ProcessID]*member{}, addrs: map[edict.ProcessID]string{}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 1; i <= n; i++ {
		id := edict.ProcessID(i)
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "client", BindAddr: "127.0.0.1:0", Logger: quiet})
		require.NoError(t, err)
		c.members[id] = &member{id: id, net: tr, ledger: newLedger()}
		c.addrs[id] = tr.LocalAddr()
	}
	if len(start) == 0 {
		for id := range c.members {
			start = append(start, id)
		}
	}
	for _, id := range start {
		m := c.members[id]
		snaps, err := storage.NewMemSnapshotStore(2)
		require.NoError(t, err)
		node, err := edictlog.Start(context.Background(), edictlog.Config{ID: id, Peers: c.addrs, Store: storage.NewMemStore(), Snapshots: snaps,
			Transport: m.net, FSM: m.ledger, Logger: quiet, RoundTrip: 25 * time.Millisecond, RenewInterval: 300 * time.Millisecond})
		require.NoError(t, err)
		m.node.Store(node)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if n := m.node.Load(); n != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = n.Shutdown(ctx)
				cancel()
			}
			m.net.Close()
		}
	})
	return c
}

func (c *cluster) endpoints() map[edict.ProcessID]client.Endpoint {
	eps := map[edict.ProcessID]client.Endpoint{}
	for id, m := range c.members {
		eps[id] = m
	}
	return eps
}

// kill stops a member as a crash looks to the others: its network goes
// first. Its endpoint keeps the stopped Node, which refuses with
// edictlog.ErrShutdown.
func (c *cluster) kill(id edict.ProcessID) {
	m := c.members[id]
	m.killed = true
	m.net.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, m.node.Load().Shutdown(ctx))
}

func (c *cluster) leader(within time.Duration) *member {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, m := range c.members {
			if n := m.node.Load(); n != nil && !m.killed && n.Status().IsLeader {
				return m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

// Writes through the client go to the leader, wherever it is, and every
// read level answers through it.
func TestClientRoutesAndReadsAtEveryLevel(t *testing.T) {
	c := newCluster(t, 3)
	cl, err := client.New(client.Config{Endpoints: c.endpoints()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last uint64
	for i := range 20 {
		res, err := cl.Apply(ctx, fmt.Appendf(nil, "w%d", i))
		require.NoError(t, err)
		require.Greater(t, res.Index, last)
		require.Equal(t, 1, res.Response)
		last = res.Index
	}
	l := c.leader(10 * time.Second)
	require.Equal(t, l.id, cl.Leader())
	for _, level := range []edictlog.ReadLevel{edictlog.ReadLease, edictlog.ReadFollower} {
		for range 3 {
			res, err := cl.Read(ctx, level, []byte("w19"))
			require.NoError(t, err, "%v", level)
			require.Equal(t, "1", string(res.Data), "%v", level)
			require.GreaterOrEqual(t, res.Index, last, "%v", level)
		}
	}
	// A stale read may lag, but not below what it reports.
	res, err := cl.Read(ctx, edictlog.ReadStale, []byte("w0"))
	require.NoError(t, err)
	if res.Index >= last {
		require.Equal(t, "1", string(res.Data))
	}
}

// 8 writers write distinct commands through the client while the leader
// is killed and then leadership moves to another member. Every write the
// client acknowledged is applied exactly once; none is applied twice; and
// no write fails but with an unknown outcome.
func TestClientThroughLeaderKillAndChange(t *testing.T) {
	c := newCluster(t, 3)
	cl, err := client.New(client.Config{Endpoints: c.endpoints(), MaxBackoff: 100 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu      sync.Mutex
		acked   []string
		unknown []string
		written atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				cmd := fmt.Sprintf("g%d-%d", g, i)
				wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
				_, err := cl.Apply(wctx, []byte(cmd))
				wcancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, cmd)
				case errors.Is(err, edictlog.ErrOutcomeUnknown):
					unknown = append(unknown, cmd)
				default:
					mu.Unlock()
					errs <- fmt.Errorf("write %s: %w", cmd, err)
					return
				}
				mu.Unlock()
				written.Add(1)
			}
		}()
	}
	waitWritten := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for written.Load() < n {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			require.True(t, time.Now().Before(deadline), "writes stalled at %d", written.Load())
			time.Sleep(5 * time.Millisecond)
		}
	}

	waitWritten(200)
	old := c.leader(10 * time.Second)
	c.kill(old.id)
	base := written.Load()
	waitWritten(base + 200)

	l := c.leader(10 * time.Second)
	var target edict.ProcessID
	for id := range c.members {
		if id != old.id && id != l.id {
			target = id
		}
	}
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	require.NoError(t, l.node.Load().TransferLeadership(tctx, target))
	tcancel()
	base = written.Load()
	waitWritten(base + 200)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every survivor applies everything the new leader committed.
	bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
	res, err := cl.Apply(bctx, []byte("barrier"))
	bcancel()
	require.NoError(t, err)
	for id, m := range c.members {
		if id == old.id {
			continue
		}
		deadline := time.Now().Add(20 * time.Second)
		for m.node.Load().Status().Applied < res.Index {
			require.True(t, time.Now().Before(deadline), "member %v did not apply %d", id, res.Index)
			time.Sleep(5 * time.Millisecond)
		}
		counts := m.ledger.snapshot()
		for cmd, n := range counts {
			require.Equal(t, 1, n, "member %v applied %s %d times", id, cmd, n)
		}
		for _, cmd := range acked {
			require.Equal(t, 1, counts[cmd], "member %v: acknowledged write %s", id, cmd)
		}
		for _, cmd := range unknown {
			require.LessOrEqual(t, counts[cmd], 1, "member %v: write %s of unknown outcome", id, cmd)
		}
	}
	require.Equal(t, target, cl.Leader(), "the client follows the leader")
	t.Logf("%d writes acknowledged, %d of unknown outcome", len(acked), len(unknown))
}

// With no quorum running, a write waits out the caller's context and
// fails as a refusal that names the context's end: nothing was written.
func TestClientGivesUpWithTheContext(t *testing.T) {
	c := newCluster(t, 3, 1)
	cl, err := client.New(client.Config{Endpoints: c.endpoints()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err = cl.Apply(ctx, []byte("x"))
	var nl *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, edictlog.ErrOutcomeUnknown)
	require.Empty(t, c.members[1].ledger.snapshot())
}

// fake is an endpoint that answers with the errors it is given, in turn,
// and counts the calls.
type fake struct {
	calls atomic.Int32
	errs  []error
}

func (f *fake) Apply(context.Context, []byte) (edictlog.ApplyResult, error) {
	i := int(f.calls.Add(1)) - 1
	if i < len(f.errs) {
		return edictlog.ApplyResult{}, f.errs[i]
	}
	return edictlog.ApplyResult{Index: 7}, nil
}

func (f *fake) Read(ctx context.Context, _ edictlog.ReadLevel, _ []byte) (edictlog.ReadResult, error) {
	_, err := f.Apply(ctx, nil)
	return edictlog.ReadResult{Index: 7}, err
}

// The client sends a write again only after a refusal made before
// anything was written, follows the leader a refusal names, and never
// retries an unknown outcome or a failure after sending.
func TestClientRetriesOnlyWhatIsSafe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sendFailed := errors.New("connection reset after the request was written")
	for _, tc := range []struct {
		name  string
		errs  map[edict.ProcessID][]error
		calls map[edict.ProcessID]int32
		final error
	}{
		{"a hint is followed at once", map[edict.ProcessID][]error{1: {&edictlog.NotLeaderError{Leader: 3, Err: edictlog.ErrNotLeader}}},
			map[edict.ProcessID]int32{1: 1, 2: 0, 3: 1}, nil},
		{"no hint: the next endpoint", map[edict.ProcessID][]error{1: {&edictlog.NotLeaderError{Err: edictlog.ErrStopped}}},
			map[edict.ProcessID]int32{1: 1, 2: 1, 3: 0}, nil},
		{"a stopped member", map[edict.ProcessID][]error{1: {edictlog.ErrShutdown}}, map[edict.ProcessID]int32{1: 1, 2: 1}, nil},
		{"not sent", map[edict.ProcessID][]error{1: {fmt.Errorf("dial: %w", client.ErrNotSent)}}, map[edict.ProcessID]int32{1: 1, 2: 1}, nil},
		{"not committed: again at the same member", map[edict.ProcessID][]error{1: {edictlog.ErrNotCommitted}}, map[edict.ProcessID]int32{1: 2, 2: 0}, nil},
		{"unknown outcome is final", map[edict.ProcessID][]error{1: {fmt.Errorf("%w: %w", edictlog.ErrOutcomeUnknown, edictlog.ErrShutdown)}},
			map[edict.ProcessID]int32{1: 1, 2: 0, 3: 0}, edictlog.ErrOutcomeUnknown},
		{"a failure after sending is final", map[edict.ProcessID][]error{1: {sendFailed}}, map[edict.ProcessID]int32{1: 1, 2: 0, 3: 0}, sendFailed},
		{"every member refuses: back off, then succeed", map[edict.ProcessID][]error{
			1: {&edictlog.NotLeaderError{Err: edictlog.ErrNoLeader}}, 2: {&edictlog.NotLeaderError{Err: edictlog.ErrNoLeader}}, 3: {&edictlog.NotLeaderError{Err: edictlog.ErrNoLeader}}},
			map[edict.ProcessID]int32{1: 2, 2: 1, 3: 1}, nil},
	} {
		fakes := map[edict.ProcessID]*fake{}
		eps := map[edict.ProcessID]client.Endpoint{}
		for id := edict.ProcessID(1); id <= 3; id++ {
			fakes[id] = &fake{errs: tc.errs[id]}
			eps[id] = fakes[id]
		}
		cl, err := client.New(client.Config{Endpoints: eps, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
		require.NoError(t, err)
		_, err = cl.Apply(ctx, []byte("x"))
		if tc.final == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, tc.final, tc.name)
		}
		for id, want := range tc.calls {
			require.Equal(t, want, fakes[id].calls.Load(), "%s: calls at %v", tc.name, id)
		}
	}
	// Reads: the state machine's own error is an answer.
	qe := &edictlog.QueryError{Index: 7, Err: errors.New("bad query")}
	f := &fake{errs: []error{qe}}
	cl, err := client.New(client.Config{Endpoints: map[edict.ProcessID]client.Endpoint{1: f, 2: &fake{}}})
	require.NoError(t, err)
	_, err = cl.Read(ctx, edictlog.ReadLease, nil)
	require.ErrorIs(t, err, qe)
	require.Equal(t, int32(1), f.calls.Load())
}
