package edictlog_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// gatedSnapshots is a snapshot store whose sinks block in Write until
// the gate opens, and which records any use after the Node that uses it
// has been stopped (closed is set once Stop or Shutdown returned).
type gatedSnapshots struct {
	edictlog.SnapshotStore
	writing chan struct{} // closed at the first blocked Write
	once    sync.Once
	gate    chan struct{}
	closed  atomic.Bool
	late    atomic.Int32 // calls made after closed was set
}

func (g *gatedSnapshots) used() {
	if g.closed.Load() {
		g.late.Add(1)
	}
}

func (g *gatedSnapshots) Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error) {
	g.used()
	s, err := g.SnapshotStore.Create(meta)
	if err != nil {
		return nil, err
	}
	return &gatedSink{SnapshotSink: s, g: g}, nil
}

func (g *gatedSnapshots) List() ([]wire.SnapshotMeta, error) {
	g.used()
	return g.SnapshotStore.List()
}

func (g *gatedSnapshots) Open(id string) (wire.SnapshotMeta, io.ReadCloser, error) {
	g.used()
	return g.SnapshotStore.Open(id)
}

type gatedSink struct {
	wire.SnapshotSink
	g *gatedSnapshots
}

func (s *gatedSink) Write(p []byte) (int, error) {
	s.g.once.Do(func() { close(s.g.writing) })
	<-s.g.gate
	s.g.used()
	return s.SnapshotSink.Write(p)
}

func (s *gatedSink) Close() error  { s.g.used(); return s.SnapshotSink.Close() }
func (s *gatedSink) Cancel() error { s.g.used(); return s.SnapshotSink.Cancel() }

// Stop and Shutdown return only once nothing of the Node uses its stores
// any more: a snapshot being written when the Node stops is finished or
// abandoned first. An embedder that starts the process again on the same
// folder right after, as a restart on a new address does, opens a
// snapshot store that removes what an unfinished snapshot left; a writer
// still running then publishes a snapshot without its data, and every
// later start fails on it.
func TestStopWaitsForTheSnapshotBeingWritten(t *testing.T) {
	for _, stop := range []string{"Stop", "Shutdown"} {
		t.Run(stop, func(t *testing.T) {
			var g *gatedSnapshots
			c := newNetCluster(t, 1, func(cfg *edictlog.Config) {
				cfg.SnapshotEvery = 16
				if g == nil { // the first life only
					g = &gatedSnapshots{SnapshotStore: cfg.Snapshots, writing: make(chan struct{}), gate: make(chan struct{})}
					cfg.Snapshots = g
				}
			})
			var opened sync.Once
			open := func() { opened.Do(func() { close(g.gate) }) }
			t.Cleanup(open) // before the cluster's own cleanup stops what is left
			n := c.node(1)
			c.waitLeader(10 * time.Second)
			for i := range 20 {
				c.put(fmt.Sprintf("k%02d", i), "v")
			}
			select {
			case <-g.writing:
			case <-time.After(20 * time.Second):
				t.Fatal("no snapshot was taken")
			}
			// The gate opens a while after the stop has begun, so that a
			// stop that does not wait returns first.
			go func() {
				time.Sleep(50 * time.Millisecond)
				open()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			if stop == "Stop" {
				err = n.Stop(ctx)
			} else {
				err = n.Shutdown(ctx)
			}
			require.NoError(t, err)
			g.closed.Store(true)
			delete(c.nodes, 1)
			n.net.Close()
			require.NoError(t, n.store.Close())
			time.Sleep(100 * time.Millisecond) // what would still run, runs now
			require.Zero(t, g.late.Load(), "the snapshot store was used after %s returned", stop)

			// What the stop left is whole: every listed snapshot reads
			// back, and the process starts again from it.
			snaps, err := storage.NewFileSnapshotStore(filepath.Join(c.dir, "snap1"), 2)
			require.NoError(t, err)
			metas, err := snaps.List()
			require.NoError(t, err)
			for _, m := range metas {
				require.NoError(t, snaps.Verify(m.ID))
			}
			c.restart(1)
			c.waitLeader(10 * time.Second)
			c.put("after", "v")
		})
	}
}
