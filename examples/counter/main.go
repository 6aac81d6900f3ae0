// Command counter is a tiny replicated service on edictlog: three processes
// in one program keep a counter. Each increment is a log entry; the leader
// answers reads under its lease with no network round trip.
//
// It then stops a follower and starts it again from its files on a new
// port, as a container rescheduled elsewhere would be, with the same
// configuration as before: nobody tells the cluster the new address. The
// restarted process announces it to the peers it connects to
// (transport.TCP's hello), they reach it there at once, and the leader
// makes it the cluster's (edictlog.Node.SetAddress). The stop is a clean
// one (edictlog.Node.Shutdown, as on SIGTERM): the follower grants
// nothing more, waits about one lease for the leases it granted to lapse,
// and records so; its next life therefore starts without the restart
// quarantine — (1+ρ)·MaxLease, during which a restarted process takes no
// part in the log — and answers a linearizable read as soon as the
// leader's appends reach its new address. It then takes the leadership
// and commits a write itself.
//
// Last, another follower is killed (its transport closed under it, so it
// cannot even release anything) and started again: after a crash the
// process may have forgotten a grant, and its first read comes only
// after the quarantine.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// counter is the state machine; an entry's data is an amount to add.
type counter struct{ n atomic.Uint64 }

func (c *counter) Apply(e fsm.Entry) any {
	if len(e.Data) == 8 { // reign-start and barrier entries carry no data
		return c.n.Add(binary.BigEndian.Uint64(e.Data))
	}
	return c.n.Load()
}

func (c *counter) Query([]byte) ([]byte, error)    { return u64(c.n.Load()), nil }
func (c *counter) Snapshot() (fsm.Snapshot, error) { return snap(u64(c.n.Load())), nil }
func (c *counter) Restore(r io.Reader) error {
	b, err := io.ReadAll(r) // to the end: the store checks its digest there
	if err == nil && len(b) != 8 {
		err = fmt.Errorf("counter: snapshot of %d bytes, want 8", len(b))
	}
	if err == nil {
		c.n.Store(binary.BigEndian.Uint64(b))
	}
	return err
}

type snap []byte

func (s snap) Persist(w io.Writer) error { _, err := w.Write(s); return err }
func (s snap) Release()                  {}
func u64(n uint64) []byte                { return binary.BigEndian.AppendUint64(nil, n) }

// The lease timings, edictlog's defaults written out: MaxLease is also,
// times 1+ρ, how long a process restarted after a crash stays in
// quarantine.
const (
	roundTrip     = 10 * time.Millisecond
	renewInterval = 300 * time.Millisecond
	maxLease      = 2 * (roundTrip + renewInterval)
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// member is one process of the cluster: a transport, a log store, a
// snapshot directory and a Node. Its files outlive a stop, so it can be
// started again from them.
type member struct {
	id    edict.ProcessID
	dir   string
	net   *transport.TCP
	store *storage.WALStore
	node  *edictlog.Node
}

// listen opens the member's transport on a free port of 127.0.0.1.
func (m *member) listen() error {
	t, err := transport.NewTCP(transport.TCPConfig{ID: m.id, ClusterID: "counter", BindAddr: "127.0.0.1:0", Logger: quiet})
	m.net = t
	return err
}

// start starts the member's Node from its files. peers is the
// configuration every start is given: the addresses of the first start.
func (m *member) start(ctx context.Context, peers map[edict.ProcessID]string) error {
	store, err := storage.OpenWAL(filepath.Join(m.dir, fmt.Sprintf("%d.wal", m.id)), nil)
	if err != nil {
		return err
	}
	snaps, err := storage.NewFileSnapshotStore(filepath.Join(m.dir, fmt.Sprintf("snap%d", m.id)), 2)
	if err != nil {
		store.Close()
		return err
	}
	m.store = store
	m.node, err = edictlog.Start(ctx, edictlog.Config{ID: m.id, Peers: peers, Store: store, Snapshots: snaps, Transport: m.net,
		FSM: &counter{}, Logger: quiet, RoundTrip: roundTrip, RenewInterval: renewInterval, MaxLease: maxLease})
	return err
}

// stop shuts the Node down cleanly (Shutdown), then what it used. It
// returns the clean stop's error: one cut short leaves its next start in
// quarantine.
func (m *member) stop() error {
	var err error
	if m.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = m.node.Shutdown(ctx)
		cancel()
	}
	m.close()
	return err
}

// kill stops the member as a crash would look to the others: its network
// goes first, so it sends nothing more, and the Node is stopped without
// the clean stop's wait (Stop).
func (m *member) kill() {
	if m.net != nil {
		m.net.Close()
	}
	if m.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.node.Stop(ctx)
		cancel()
	}
	m.close()
}

func (m *member) close() {
	if m.net != nil {
		m.net.Close()
	}
	if m.store != nil {
		m.store.Close()
	}
	m.node, m.net, m.store = nil, nil, nil
}

// Result is what run saw.
type Result struct {
	Before, After uint64 // lease reads before and after the restart
	Restarted     edict.ProcessID
	OldAddr       string
	NewAddr       string
	// Stopped is how long the follower's clean stop took (Shutdown);
	// Served, the time from the restarted process's start to its first
	// linearizable read; Wrote, to its first write as leader.
	Stopped, Served, Wrote time.Duration
	// Killed is the follower killed last, and CrashServed the time from
	// its restart to its first linearizable read, quarantine included.
	Killed      edict.ProcessID
	CrashServed time.Duration
}

// run starts the cluster, adds 1..5 through the leader, restarts a
// follower on a new port, and adds 6 through it once it leads.
func run(ctx context.Context, dir string, out io.Writer) (Result, error) {
	var res Result
	peers := map[edict.ProcessID]string{}
	members := map[edict.ProcessID]*member{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		m := &member{id: id, dir: dir}
		defer m.stop()
		if err := m.listen(); err != nil {
			return res, err
		}
		members[id], peers[id] = m, m.net.LocalAddr()
	}
	for _, m := range members {
		if err := m.start(ctx, peers); err != nil {
			return res, err
		}
	}
	leader, err := waitLeader(ctx, members)
	if err != nil {
		return res, err
	}
	for add := uint64(1); add <= 5; add++ {
		r, err := leader.node.Apply(ctx, u64(add))
		if err != nil {
			return res, err
		}
		fmt.Fprintf(out, "add %d -> %d (log index %d)\n", add, r.Response, r.Index)
	}
	if res.Before, err = read(ctx, leader.node, edictlog.ReadLease); err != nil {
		return res, err
	}
	fmt.Fprintln(out, "lease read:", res.Before)

	// Restart a follower on a new port, with the configuration it was
	// first given.
	var f *member
	for id, m := range members {
		if id != leader.id {
			f = m
		}
	}
	res.Restarted, res.OldAddr = f.id, peers[f.id]
	stopping := time.Now()
	if err := f.stop(); err != nil {
		return res, fmt.Errorf("node %v: clean stop: %w", f.id, err)
	}
	res.Stopped = time.Since(stopping)
	started := time.Now()
	n, err := restart(ctx, f, peers)
	if err != nil {
		return res, err
	}
	res.NewAddr = f.net.LocalAddr()
	res.Served = time.Since(started)
	fmt.Fprintf(out, "node %v stopped cleanly in %v; restarted on %s (was %s): follower read %d %v after its start (no quarantine; MaxLease %v)\n",
		f.id, res.Stopped.Round(time.Millisecond), res.NewAddr, res.OldAddr, n, res.Served.Round(time.Millisecond), maxLease)

	// Writes through it: it takes the leadership and commits.
	for !f.node.Status().IsLeader {
		l, err := waitLeader(ctx, members)
		if err != nil {
			return res, err
		}
		if err := l.node.TransferLeadership(ctx, f.id); err != nil && ctx.Err() != nil {
			return res, err
		}
	}
	r, err := f.node.Apply(ctx, u64(6))
	if err != nil {
		return res, fmt.Errorf("write through node %v: %w", f.id, err)
	}
	res.Wrote = time.Since(started)
	fmt.Fprintf(out, "node %v leads: add 6 -> %d (log index %d) %v after its start\n", f.id, r.Response, r.Index, res.Wrote.Round(time.Millisecond))
	if res.After, err = read(ctx, f.node, edictlog.ReadLease); err != nil {
		return res, err
	}
	fmt.Fprintln(out, "lease read:", res.After)

	// A crash instead: the restart sits out the quarantine.
	var k *member
	for id, m := range members {
		if id != f.id {
			k = m
		}
	}
	res.Killed = k.id
	k.kill()
	started = time.Now()
	if n, err = restart(ctx, k, peers); err != nil {
		return res, err
	}
	res.CrashServed = time.Since(started)
	fmt.Fprintf(out, "node %v killed; restarted on %s: follower read %d %v after its start (restart quarantine (1+ρ)·MaxLease, %v)\n",
		k.id, k.net.LocalAddr(), n, res.CrashServed.Round(time.Millisecond), maxLease)
	return res, nil
}

// restart starts m again from its files on a new port, with the
// configuration it was first given, and returns its first linearizable
// read.
func restart(ctx context.Context, m *member, peers map[edict.ProcessID]string) (uint64, error) {
	if err := m.listen(); err != nil {
		return 0, err
	}
	if err := m.start(ctx, peers); err != nil {
		return 0, err
	}
	for {
		// Until the leader's appends reach the new address (and, after
		// a crash, the quarantine ends), the read finds no leader or one
		// it cannot hear.
		n, err := read(ctx, m.node, edictlog.ReadFollower)
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("node %v restarted on %s: no read: %w", m.id, m.net.LocalAddr(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeader waits for a member that leads.
func waitLeader(ctx context.Context, members map[edict.ProcessID]*member) (*member, error) {
	for {
		for _, m := range members {
			if m.node != nil && m.node.Status().IsLeader {
				return m, nil
			}
		}
		if ctx.Err() != nil {
			return nil, errors.New("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// read reads the counter at level on n.
func read(ctx context.Context, n *edictlog.Node, level edictlog.ReadLevel) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := n.Read(rctx, level, nil)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(r.Data), nil
}

func main() {
	dir, err := os.MkdirTemp("", "counter")
	if err == nil {
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = run(ctx, dir, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "counter:", err)
		os.Exit(1)
	}
}
