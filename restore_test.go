package edictlog_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// headFSM counts its entries. Its snapshot is the count in 8 bytes and
// then padding, and its Restore reads the count and stops: a format that
// knows where the state ends, which leaves the snapshot's tail — and the
// snapshot store's digest check at the end — unread.
type headFSM struct {
	mu sync.Mutex
	n  uint64
}

const headPadding = 4096

func (f *headFSM) Apply(fsm.Entry) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}

func (f *headFSM) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *headFSM) Snapshot() (fsm.Snapshot, error) { return headSnap(f.count()), nil }

func (f *headFSM) Restore(r io.Reader) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.n = binary.BigEndian.Uint64(b[:])
	f.mu.Unlock()
	return nil
}

type headSnap uint64

func (s headSnap) Persist(w io.Writer) error {
	b := make([]byte, 8+headPadding)
	binary.BigEndian.PutUint64(b, uint64(s))
	_, err := w.Write(b)
	return err
}

func (headSnap) Release() {}

// A snapshot whose tail is damaged is refused at start even though the
// state machine's Restore never reads that far and returns nil: the log
// reads the rest of the stream, and the store's digest check fails it.
// The same snapshot undamaged restores.
func TestStartChecksTheSnapshotTheFSMLeftUnread(t *testing.T) {
	dir := t.TempDir()
	store := storage.NewMemStore()
	snaps, err := storage.NewFileSnapshotStore(dir, 2)
	require.NoError(t, err)
	start := func(f *headFSM) (*edictlog.Node, *transport.TCP, error) {
		tr, err := transport.NewTCP(transport.TCPConfig{ID: 1, ClusterID: "head", BindAddr: "127.0.0.1:0", Logger: quietLogger()})
		require.NoError(t, err)
		n, err := edictlog.Start(context.Background(), edictlog.Config{ID: 1, Peers: map[edict.ProcessID]string{1: tr.LocalAddr()}, Store: store,
			Snapshots: snaps, Transport: tr, FSM: f, Logger: quietLogger()})
		if err != nil {
			tr.Close()
		}
		return n, tr, err
	}
	stop := func(n *edictlog.Node, tr *transport.TCP) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, n.Shutdown(ctx))
		tr.Close()
	}

	n, tr, err := start(&headFSM{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 {
		_, err := n.Apply(ctx, []byte("x"))
		require.NoError(t, err)
	}
	_, err = n.Snapshot(ctx)
	require.NoError(t, err)
	stop(n, tr)

	// Undamaged, it restores: the count is the snapshot's.
	f := &headFSM{}
	n, tr, err = start(f)
	require.NoError(t, err)
	require.GreaterOrEqual(t, f.count(), uint64(5))
	stop(n, tr)

	metas, err := snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	data := filepath.Join(dir, metas[0].ID, "data")
	b, err := os.ReadFile(data)
	require.NoError(t, err)
	require.Len(t, b, 8+headPadding)
	b[len(b)-1] ^= 0xff // past what Restore reads
	require.NoError(t, os.WriteFile(data, b, 0o600))

	_, _, err = start(&headFSM{})
	require.ErrorIs(t, err, edictlog.ErrSnapshotUnread)
	require.ErrorIs(t, err, storage.ErrCorrupt)
}

// Start's context bounds the restore: a context that has ended fails the
// start before anything is read.
func TestStartHonoursItsContext(t *testing.T) {
	tr, err := transport.NewTCP(transport.TCPConfig{ID: 1, ClusterID: "ctx", BindAddr: "127.0.0.1:0", Logger: quietLogger()})
	require.NoError(t, err)
	defer tr.Close()
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = edictlog.Start(ctx, edictlog.Config{ID: 1, Peers: map[edict.ProcessID]string{1: tr.LocalAddr()}, Store: storage.NewMemStore(),
		Snapshots: snaps, Transport: tr, FSM: &headFSM{}, Logger: quietLogger()})
	require.ErrorIs(t, err, context.Canceled)
}

// tailFails is a snapshot store whose streams fail where the store's
// digest check would: at their end, in place of io.EOF.
type tailFails struct{ edictlog.SnapshotStore }

func (s tailFails) Open(id string) (wire.SnapshotMeta, io.ReadCloser, error) {
	m, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return m, rc, err
	}
	return m, failAtEOF{rc}, nil
}

type failAtEOF struct{ io.ReadCloser }

func (f failAtEOF) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF {
		err = fmt.Errorf("snapshot digest: %w", storage.ErrCorrupt)
	}
	return n, err
}

// A follower that installs a leader's snapshot checks it whatever its
// state machine reads: the state machine stops after 8 bytes, the rest of
// the stored stream fails its check, and the Node stops rather than go on
// from a state read from a stream that did not check out.
func TestInstallChecksTheSnapshotTheFSMLeftUnread(t *testing.T) {
	c := newNetCluster(t, 3, func(cfg *edictlog.Config) {
		cfg.FSM = &headFSM{}
		cfg.TrailingEntries = 2
	})
	for i := range 10 {
		c.put(fmt.Sprintf("a%d", i), "v")
	}
	l := c.waitLeader(10 * time.Second)
	lagger := c.others(l.id)[0]
	waitApplied(t, c.barrier(), lagger)
	c.kill(lagger.id)
	for i := range 20 {
		c.put(fmt.Sprintf("b%d", i), "v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l = c.waitLeader(10 * time.Second)
	_, err := l.Snapshot(ctx)
	require.NoError(t, err)
	require.Greater(t, l.Status().FirstIndex, lagger.Status().LastIndex, "the lagger needs a snapshot")

	n := c.restart(lagger.id, func(cfg *edictlog.Config) { cfg.Snapshots = tailFails{cfg.Snapshots} })
	events := make(chan edictlog.Event, 64)
	obs := n.Observe(events, func(ev edictlog.Event) bool {
		return ev.Kind == edictlog.Stopped || ev.Kind == edictlog.SnapshotInstalled
	})
	defer obs.Cancel()
	for {
		select {
		case ev := <-events:
			require.NotEqual(t, edictlog.SnapshotInstalled, ev.Kind, "a snapshot that failed its check was installed")
			require.Contains(t, ev.Reason, edictlog.ErrSnapshotUnread.Error())
			return
		case <-ctx.Done():
			t.Fatal("the follower did not stop on a snapshot that failed its check")
		}
	}
}
