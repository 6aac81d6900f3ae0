// Command counter is a tiny replicated service on edictlog: three processes
// in one program keep a counter. Each increment is a log entry; the leader
// answers reads under its lease with no network round trip.
//
// It then restarts a follower from its files on a new port, as a container
// rescheduled elsewhere would be, with the same configuration as before:
// nobody tells the cluster the new address. The restarted process
// announces it to the peers it connects to (transport.TCP's hello), they
// reach it there at once, and the leader makes it the cluster's
// (edictlog.Node.SetAddress). The follower answers a linearizable read as soon
// as its restart quarantine — one MaxLease, during which a restarted
// process takes no part in the log — is over, then takes the leadership
// and commits a write itself.
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

// The lease timings, edictlog's defaults written out: MaxLease is also
// how long a restarted process stays in quarantine.
const (
	roundTrip     = 10 * time.Millisecond
	renewInterval = 300 * time.Millisecond
	maxLease      = 2 * (roundTrip + renewInterval)
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// member is one process of the cluster: a transport, a bbolt file, a
// snapshot directory and a Node. Its files outlive a stop, so it can be
// started again from them.
type member struct {
	id    edict.ProcessID
	dir   string
	net   *transport.TCP
	store *storage.BoltStore
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
	store, err := storage.OpenBolt(filepath.Join(m.dir, fmt.Sprintf("%d.db", m.id)), nil)
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

// stop shuts the Node down, then what it used.
func (m *member) stop() {
	if m.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.node.Shutdown(ctx)
		cancel()
	}
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
	// Served is the time from the restarted process's start to its first
	// linearizable read; Wrote, to its first write as leader.
	Served, Wrote time.Duration
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
	f.stop()
	if err := f.listen(); err != nil {
		return res, err
	}
	res.NewAddr = f.net.LocalAddr()
	started := time.Now()
	if err := f.start(ctx, peers); err != nil {
		return res, err
	}
	var n uint64
	for {
		// Until the quarantine ends and the leader's appends reach the
		// new address, the read finds no leader or one it cannot hear.
		if n, err = read(ctx, f.node, edictlog.ReadFollower); err == nil {
			break
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("node %v restarted on %s: no read: %w", f.id, res.NewAddr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.Served = time.Since(started)
	fmt.Fprintf(out, "node %v restarted on %s (was %s): follower read %d %v after its start (restart quarantine: one MaxLease, %v)\n",
		f.id, res.NewAddr, res.OldAddr, n, res.Served.Round(time.Millisecond), maxLease)

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
	return res, nil
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
