// Command counter is a tiny replicated service on edictlog: three processes
// in one program keep a counter. Each increment is a log entry; the leader
// answers reads under its lease with no network round trip.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/log"
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

// run starts the cluster, adds 1..5 through the leader and returns a lease
// read of the counter.
func run(ctx context.Context, dir string, out io.Writer) uint64 {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peers, nets, nodes := map[edict.ProcessID]string{}, map[edict.ProcessID]*transport.TCP{}, []*log.Node{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		t := must(transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "counter", BindAddr: "127.0.0.1:0", Logger: quiet}))
		defer t.Close()
		nets[id], peers[id] = t, t.LocalAddr()
	}
	for id, t := range nets {
		store := must(storage.OpenBolt(filepath.Join(dir, fmt.Sprintf("%d.db", id)), nil))
		defer store.Close()
		snaps := must(storage.NewFileSnapshotStore(filepath.Join(dir, fmt.Sprintf("snap%d", id)), 2))
		n := must(log.Start(ctx, log.Config{ID: id, Peers: peers, Store: store, Snapshots: snaps, Transport: t, FSM: &counter{}, Logger: quiet}))
		defer n.Shutdown(context.Background())
		nodes = append(nodes, n)
	}
	for i := 0; ; i = (i + 1) % len(nodes) { // wait for a leader
		if leader := nodes[i]; leader.Status().IsLeader {
			for add := uint64(1); add <= 5; add++ {
				res := must(leader.Apply(ctx, u64(add)))
				fmt.Fprintf(out, "add %d -> %d (log index %d)\n", add, res.Response, res.Index)
			}
			return binary.BigEndian.Uint64(must(leader.Read(ctx, log.ReadLease, nil)).Data)
		}
		must(0, ctx.Err())
		time.Sleep(5 * time.Millisecond)
	}
}

// must keeps the example short: a real service handles its errors.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func main() {
	dir := must(os.MkdirTemp("", "counter"))
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fmt.Println("lease read:", run(ctx, dir, os.Stdout))
}
