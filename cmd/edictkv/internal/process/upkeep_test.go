package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/compactor"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
)

// A follower that restarts behind the others is ready only once it has
// applied what the leader had committed: /readyz says 200 and its state
// already holds every write acknowledged before it restarted.
func TestReadyMeansCaughtUp(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.leader()
	f := c.follower(leader)
	old := c.procs[f]
	cfg := old.cfg
	cfg.RaftAddr, cfg.HTTPAddr = old.RaftAddr(), old.HTTPAddr()
	peers := map[edict.ProcessID]Peer{}
	for id, p := range c.procs {
		peers[id] = Peer{RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr()}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv := c.procs[leader].kv
	value := make([]byte, 4<<10)
	for i := range 400 {
		if _, _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%04d", i), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	want := c.procs[leader].State.Rev()

	p, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.procs[f] = p
	if err := p.Start(peers); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted follower is ready", func() bool {
		return do(t, http.MethodGet, c.url(f, "/readyz"), "").status == http.StatusOK
	})
	if got := p.State.Rev(); got < want {
		t.Fatalf("ready at revision %d, before the leader's %d", got, want)
	}
}

// With auto-compaction on, the leader compacts the history on its own,
// and every replica compacts at the same revision (a log entry).
func TestAutoCompaction(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.AutoCompaction = compactor.Retention{Mode: compactor.Periodic, Period: compactor.MinPeriod}
	})
	leader := c.leader()
	ctx := context.Background()
	kv := c.procs[leader].kv
	put := func() {
		if _, _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	put()
	first := c.procs[leader].State.Rev()
	// Writes go on while the compactor samples: it compacts to what it
	// sampled a period ago.
	eventually(t, "a compaction past the first write", func() bool {
		put()
		return c.procs[leader].State.CompactRev() >= first
	})
	cr := c.procs[leader].State.CompactRev()
	for id, p := range c.procs {
		eventually(t, fmt.Sprintf("process %d compacted", id), func() bool { return p.State.CompactRev() >= cr })
		_, _, err := p.State.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: first - 1})
		if !errors.Is(err, kvstate.ErrCompacted) {
			t.Fatalf("process %d: a read below the compaction: %v", id, err)
		}
	}
}
