package edictlog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// A three-node cluster in one process, with real log files and real TCP
// on 127.0.0.1: write, read, kill the leader's node, and read again from
// the new leader — no acknowledged write is lost.
func Example() {
	dir, _ := os.MkdirTemp("", "edictlog-example")
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Each node needs a transport (listening already, so every address is
	// known), a store, a snapshot store and a state machine.
	ids := []edict.ProcessID{1, 2, 3}
	nets := map[edict.ProcessID]*transport.TCP{}
	peers := map[edict.ProcessID]string{}
	for _, id := range ids {
		t, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "example", BindAddr: "127.0.0.1:0", Logger: quiet})
		if err != nil {
			panic(err)
		}
		nets[id], peers[id] = t, t.LocalAddr()
	}
	nodes := map[edict.ProcessID]*edictlog.Node{}
	for _, id := range ids {
		store, err := storage.OpenWAL(filepath.Join(dir, fmt.Sprintf("node%d.wal", id)), nil)
		if err != nil {
			panic(err)
		}
		defer store.Close()
		snaps, err := storage.NewFileSnapshotStore(filepath.Join(dir, fmt.Sprintf("snap%d", id)), 2)
		if err != nil {
			panic(err)
		}
		n, err := edictlog.Start(context.Background(), edictlog.Config{ID: id, Peers: peers, Store: store, Snapshots: snaps,
			Transport: nets[id], FSM: kvfsm.NewKV(), Logger: quiet})
		if err != nil {
			panic(err)
		}
		nodes[id] = n
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := waitForLeader(ctx, nodes)
	put, _ := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: "greeting", Value: "hello"}})
	if _, err := nodes[leader].Apply(ctx, put); err != nil {
		panic(err)
	}
	fmt.Println("read:", get(ctx, nodes[leader], "greeting"))

	// Kill the leader's node: its network goes first, so it cannot even
	// release its lease; the others wait the lease out and elect anew.
	nets[leader].Close()
	_ = nodes[leader].Shutdown(ctx)
	delete(nodes, leader)
	next := waitForLeader(ctx, nodes)
	fmt.Println("new leader differs:", next != leader)
	fmt.Println("read after failover:", get(ctx, nodes[next], "greeting"))

	for id, n := range nodes {
		_ = n.Shutdown(ctx)
		nets[id].Close()
	}
	// Output:
	// read: hello
	// new leader differs: true
	// read after failover: hello
}

func waitForLeader(ctx context.Context, nodes map[edict.ProcessID]*edictlog.Node) edict.ProcessID {
	for ctx.Err() == nil {
		for id, n := range nodes {
			if n.Status().IsLeader {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	panic("no leader")
}

// get is a lease read: linearizable, and answered by the leader without a
// network round trip.
func get(ctx context.Context, n *edictlog.Node, key string) string {
	q, _ := kvfsm.EncodeQuery(kvfsm.Range{Key: key})
	res, err := n.Read(ctx, edictlog.ReadLease, q)
	if err != nil {
		panic(err)
	}
	r, err := kvfsm.DecodeResult(res.Data)
	if err != nil || r.Range == nil || len(r.Range.KVs) == 0 {
		return "<missing>"
	}
	return r.Range.KVs[0].Value
}
