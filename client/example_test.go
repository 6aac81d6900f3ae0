package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/client"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// Three Nodes in one process, each an Endpoint of the client as it is: the
// client finds the leader (waiting out the first election), writes
// through it, and reads the write back linearizably from any member.
func Example() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peers, nets := map[edict.ProcessID]string{}, map[edict.ProcessID]*transport.TCP{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "example", BindAddr: "127.0.0.1:0", Logger: quiet})
		if err != nil {
			panic(err)
		}
		defer tr.Close()
		nets[id], peers[id] = tr, tr.LocalAddr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoints := map[edict.ProcessID]client.Endpoint{}
	for id, tr := range nets {
		snaps, err := storage.NewMemSnapshotStore(2)
		if err != nil {
			panic(err)
		}
		n, err := edictlog.Start(ctx, edictlog.Config{ID: id, Peers: peers, Store: storage.NewMemStore(), Snapshots: snaps,
			Transport: tr, FSM: newLedger(), Logger: quiet})
		if err != nil {
			panic(err)
		}
		defer n.Shutdown(context.Background())
		endpoints[id] = n
	}

	cl, err := client.New(client.Config{Endpoints: endpoints})
	if err != nil {
		panic(err)
	}
	res, err := cl.Apply(ctx, []byte("hello"))
	if err != nil {
		panic(err)
	}
	fmt.Println("applied, times:", res.Response)
	for _, level := range []edictlog.ReadLevel{edictlog.ReadLease, edictlog.ReadFollower} {
		r, err := cl.Read(ctx, level, []byte("hello"))
		if err != nil {
			panic(err)
		}
		fmt.Printf("%v read: %s, at or after the write: %v\n", level, r.Data, r.Index >= res.Index)
	}
	// Output:
	// applied, times: 1
	// lease read: 1, at or after the write: true
	// follower read: 1, at or after the write: true
}
