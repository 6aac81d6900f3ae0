package edictlog_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// crashImages keeps one process's three stores — its log store, its
// snapshot store and its state machine's directory — so that a test can
// take, at any moment, what a crash there would leave: every change to
// any of them holds mu, and so does an image. The log store is a
// MemStore whose changes are kept, to be replayed into an image's.
type crashImages struct {
	t   *testing.T
	mu  sync.Mutex
	log *storage.MemStore
	ops []func(*storage.MemStore) error
	// snaps is the snapshot store; dir the state machine's directory.
	snaps *storage.MemSnapshotStore
	dir   string
	// staged are the indexes whose Stage returned; checks are the order
	// the install broke, if it broke it.
	staged map[uint64]bool
	checks []string
	images []crashImage
}

// crashImage is the stores as a crash at a moment left them.
type crashImage struct {
	at    string
	log   *storage.MemStore
	snaps *storage.MemSnapshotStore
	dir   string
}

func newCrashImages(t *testing.T, dir string) *crashImages {
	snaps, err := storage.NewMemSnapshotStore(2)
	require.NoError(t, err)
	return &crashImages{t: t, log: storage.NewMemStore(), snaps: snaps, dir: dir, staged: map[uint64]bool{}}
}

// image records the stores as they are now, named at.
func (c *crashImages) image(at string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	img := crashImage{at: fmt.Sprintf("%d: %s", len(c.images), at), log: storage.NewMemStore(), dir: c.t.TempDir()}
	for _, op := range c.ops {
		if err := op(img.log); err != nil {
			c.t.Errorf("image %s: replaying the log store: %v", at, err)
			return
		}
	}
	var err error
	img.snaps, err = storage.NewMemSnapshotStore(2)
	if err != nil {
		c.t.Errorf("image %s: %v", at, err)
		return
	}
	metas, err := c.snaps.List()
	if err == nil {
		for _, m := range slices.Backward(metas) {
			if err = copySnapshot(c.snaps, img.snaps, m); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = copyFiles(c.dir, img.dir)
	}
	if err != nil {
		c.t.Errorf("image %s: %v", at, err)
		return
	}
	c.images = append(c.images, img)
}

func copySnapshot(from, to edictlog.SnapshotStore, m wire.SnapshotMeta) error {
	_, rc, err := from.Open(m.ID)
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	sink, err := to.Create(m)
	if err != nil {
		return err
	}
	if _, err := sink.Write(data); err != nil {
		return err
	}
	return sink.Close()
}

// copyFiles copies the regular files of src into dst.
func copyFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *crashImages) broke(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, fmt.Sprintf(format, args...))
}

// change applies op to the log store and keeps it for the images.
func (c *crashImages) change(op func(*storage.MemStore) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := op(c.log); err != nil {
		return err
	}
	c.ops = append(c.ops, op)
	return nil
}

// imagedStore is crashImages' log store.
type imagedStore struct {
	*storage.MemStore
	c *crashImages
}

func (s imagedStore) StoreBatch(b wire.Batch) error {
	b = cloneBatch(b)
	reset := b.Reset != nil
	if reset {
		s.c.image(fmt.Sprintf("before the log's reset to %d", b.Reset.Index))
	}
	err := s.c.change(func(m *storage.MemStore) error { return m.StoreBatch(b) })
	if reset {
		s.c.image(fmt.Sprintf("after the log's reset to %d", b.Reset.Index))
	}
	return err
}

func (s imagedStore) CompactPrefix(upTo uint64) error {
	return s.c.change(func(m *storage.MemStore) error { return m.CompactPrefix(upTo) })
}

func (s imagedStore) Set(key string, value []byte) error {
	value = bytes.Clone(value)
	return s.c.change(func(m *storage.MemStore) error { return m.Set(key, value) })
}

func (s imagedStore) Delete(key string) error {
	return s.c.change(func(m *storage.MemStore) error { return m.Delete(key) })
}

func (s imagedStore) BumpIncarnation() (uint64, error) {
	var inc uint64
	err := s.c.change(func(m *storage.MemStore) error {
		var err error
		inc, err = m.BumpIncarnation()
		return err
	})
	return inc, err
}

func cloneBatch(b wire.Batch) wire.Batch {
	out := wire.Batch{TruncateFrom: b.TruncateFrom, Delete: slices.Clone(b.Delete)}
	if b.Reset != nil {
		r := *b.Reset
		out.Reset = &r
	}
	for _, e := range b.Entries {
		e.Data = bytes.Clone(e.Data)
		out.Entries = append(out.Entries, e)
	}
	if b.Stable != nil {
		out.Stable = map[string][]byte{}
		for k, v := range b.Stable {
			out.Stable[k] = bytes.Clone(v)
		}
	}
	return out
}

// imagedSnaps is crashImages' snapshot store: an image before and after
// every snapshot is published. A snapshot recorded as staged must follow
// its Stage.
type imagedSnaps struct{ c *crashImages }

func (s imagedSnaps) Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error) {
	sink, err := s.c.snaps.Create(meta)
	if err != nil {
		return nil, err
	}
	return &imagedSink{SnapshotSink: sink, c: s.c, index: meta.Index}, nil
}

func (s imagedSnaps) List() ([]wire.SnapshotMeta, error) { return s.c.snaps.List() }

func (s imagedSnaps) Open(id string) (wire.SnapshotMeta, io.ReadCloser, error) {
	return s.c.snaps.Open(id)
}

type imagedSink struct {
	wire.SnapshotSink
	c     *crashImages
	index uint64
}

func (k *imagedSink) Close() error {
	k.c.image(fmt.Sprintf("before a snapshot at %d is published", k.index))
	k.c.mu.Lock()
	err := k.SnapshotSink.Close()
	k.c.mu.Unlock()
	if err == nil {
		metas, _ := k.c.snaps.List()
		for _, m := range metas {
			if m.ID != k.ID() {
				continue
			}
			if staged, _ := isStagedRecord(k.c.snaps, m); staged {
				k.c.mu.Lock()
				done := k.c.staged[m.Index]
				k.c.mu.Unlock()
				if !done {
					k.c.broke("the snapshot at %d was recorded as staged before the state machine's Stage returned", m.Index)
				}
			}
		}
	}
	k.c.image(fmt.Sprintf("after a snapshot at %d is published", k.index))
	return err
}

// isStagedRecord reports whether m holds no copy of the state and its
// state machine is not known to hold it durably: a snapshot recorded by
// an install into a state machine that staged it. It tells it from a
// snapshot a Sync recorded by the data's size, which differs.
func isStagedRecord(snaps edictlog.SnapshotStore, m wire.SnapshotMeta) (bool, error) {
	metaOnly, err := replog.IsMetaOnlySnapshot(snaps, m)
	if err != nil || !metaOnly {
		return false, err
	}
	probe, err := storage.NewMemSnapshotStore(1)
	if err != nil {
		return false, err
	}
	id, err := replog.SaveMetaOnlySnapshot(probe, m)
	if err != nil {
		return false, err
	}
	synced, _, err := probe.Open(id)
	if err != nil {
		return false, err
	}
	return synced.Size != m.Size, nil
}

// imagedKV is crashImages' state machine: an image before and after
// each step of a staged install, and the order of the steps checked.
type imagedKV struct {
	*diskKV
	c *crashImages
}

func (f imagedKV) Stage(index uint64, r io.Reader) error {
	f.c.image(fmt.Sprintf("before Stage(%d)", index))
	f.c.mu.Lock()
	err := f.diskKV.Stage(index, r)
	if err == nil {
		f.c.staged[index] = true
	}
	f.c.mu.Unlock()
	f.c.image(fmt.Sprintf("after Stage(%d)", index))
	return err
}

func (f imagedKV) InstallStaged(index uint64) error {
	metas, err := f.c.snaps.List()
	if err != nil || len(metas) == 0 || metas[0].Index != index {
		f.c.broke("the state machine installs the snapshot it staged at %d before the snapshot is recorded (newest recorded: %v, %v)", index, metas, err)
	}
	f.c.image(fmt.Sprintf("before InstallStaged(%d)", index))
	f.c.mu.Lock()
	err = f.diskKV.InstallStaged(index)
	f.c.mu.Unlock()
	f.c.image(fmt.Sprintf("after InstallStaged(%d)", index))
	return err
}

func (f imagedKV) DiscardStaged() error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return f.diskKV.DiscardStaged()
}

func (f imagedKV) Sync() (uint64, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return f.diskKV.Sync()
}

func (f imagedKV) Snapshot() (fsm.Snapshot, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return f.diskKV.Snapshot()
}

// A new member receives the state of a leader whose snapshots hold no
// copy of it: its state machine stages the stream, the snapshot is
// recorded, the state machine installs it, and the log is reset to it.
// Before and after each of those steps (and each publication of a
// snapshot) the member's three stores are taken as a crash there would
// leave them, and a start from each must succeed: with the old state and
// log before the record, with the snapshot's state and metadata after
// it, never a state the log cannot describe. The steps' order is checked
// as they happen too: a record before the Stage returned, or an install
// before the record, fails the test.
func TestNodeStagedInstallCrashImages(t *testing.T) {
	c := newDiskCluster(t, 3, 0, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 16, 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want, l := c.loadPastCompaction(ctx, 60)

	ci := newCrashImages(t, filepath.Join(c.dir, "fsm4"))
	tr := c.listen(4)
	n4 := c.startWith(4, tr, maps.Clone(c.addrs), func(cfg *edictlog.Config) {
		cfg.Join = true
		c.useDisk(cfg)
		cfg.FSM = imagedKV{diskKV: c.disk(4), c: ci}
		cfg.Store = imagedStore{MemStore: ci.log, c: ci}
		cfg.Snapshots = imagedSnaps{c: ci}
	})
	l = c.waitLeader(10 * time.Second)
	require.NoError(t, l.AddLearner(ctx, 4, c.addrs[4]))
	c.checkAllApplied(want, n4)
	stages, installs := c.disk(4).staging()
	require.Equal(t, 1, stages)
	require.Equal(t, 1, installs)
	c.stop(4)

	ci.mu.Lock()
	checks, images := ci.checks, ci.images
	var n uint64
	for i := range ci.staged {
		n = i
	}
	ci.mu.Unlock()
	require.Empty(t, checks, "the steps of the install came in the wrong order")
	require.NotZero(t, n, "the member staged a snapshot")
	seen := map[bool]int{}
	for _, img := range images {
		recorded, ok := fromStaged(t, img)
		d := openDiskKV(t, img.dir)
		rec, err := replog.RecoverDiskFSM(4, img.log, img.snaps, d, maps.Clone(c.addrs), true)
		require.NoError(t, err, "a start after a crash at %s", img.at)
		durable, err := d.DurableIndex()
		require.NoError(t, err)
		require.Equal(t, durable, rec.Applied, "%s: the start's applied index is the state machine's", img.at)
		require.Equal(t, rec.Applied, d.Revision(), "%s: the state machine holds the entries up to its durable index", img.at)
		if ok {
			require.Equal(t, n, recorded)
			require.GreaterOrEqual(t, rec.Applied, n, "%s: the snapshot at %d is recorded: the state machine holds it", img.at, n)
			require.Equal(t, n, rec.State.Snapshot.Index, "%s: the log starts at the snapshot", img.at)
		} else {
			require.Less(t, rec.Applied, n, "%s: nothing recorded: the old state", img.at)
		}
		require.Error(t, d.KV.InstallStaged(n), "%s: nothing is staged after a start", img.at)
		_, err = os.Stat(filepath.Join(img.dir, "staged"))
		require.ErrorIs(t, err, fs.ErrNotExist, "%s: the start leaves nothing staged", img.at)
		seen[ok]++
	}
	require.Positive(t, seen[false], "an image before the record")
	require.Positive(t, seen[true], "an image after it")
	t.Logf("%d crash images: %d before the staged snapshot's record, %d after", len(images), seen[false], seen[true])
}

// fromStaged returns the index of the newest snapshot of img's store if
// it is a staged one.
func fromStaged(t *testing.T, img crashImage) (uint64, bool) {
	t.Helper()
	metas, err := img.snaps.List()
	require.NoError(t, err)
	for _, m := range metas {
		staged, err := isStagedRecord(img.snaps, m)
		require.NoError(t, err)
		if staged {
			return m.Index, true
		}
	}
	return 0, false
}
