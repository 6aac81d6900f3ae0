package storage

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// MemSnapshotStore is a SnapshotStore in memory, for tests and the
// simulator. It assigns IDs, checksums, orders and retains snapshots as
// FileSnapshotStore does. A snapshot enters the store whole when its sink
// is closed and leaves it whole, so List holds only complete snapshots, as
// FileSnapshotStore's does after any crash.
type MemSnapshotStore struct {
	mu     sync.Mutex
	retain int
	snaps  map[string]*memSnap
}

type memSnap struct {
	meta wire.SnapshotMeta
	data []byte
}

// NewMemSnapshotStore returns an empty store keeping the newest retain
// snapshots.
func NewMemSnapshotStore(retain int) (*MemSnapshotStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("%w: snapshot retention %d, want at least 1", ErrInvalid, retain)
	}
	return &MemSnapshotStore{retain: retain, snaps: map[string]*memSnap{}}, nil
}

// Create implements SnapshotStore.
func (s *MemSnapshotStore) Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error) {
	if err := checkSnapshotMeta(&meta); err != nil {
		return nil, err
	}
	meta = cloneMeta(meta) // the caller may reuse its slices while we write
	meta.Created = time.Now()
	meta.ID = newSnapshotID(meta.Index, meta.Created)
	meta.Size, meta.SHA256 = 0, nil
	return &memSink{store: s, meta: meta}, nil
}

type memSink struct {
	store *MemSnapshotStore
	meta  wire.SnapshotMeta
	buf   bytes.Buffer
	done  bool
}

func (k *memSink) ID() string { return k.meta.ID }

func (k *memSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, fmt.Errorf("storage: snapshot %s: write after close", k.meta.ID)
	}
	return k.buf.Write(p)
}

func (k *memSink) Close() error {
	if k.done {
		return fmt.Errorf("storage: snapshot %s: already closed", k.meta.ID)
	}
	k.done = true
	sum := sha256.Sum256(k.buf.Bytes())
	k.meta.Size, k.meta.SHA256 = int64(k.buf.Len()), sum[:]
	s := k.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[k.meta.ID] = &memSnap{meta: k.meta, data: k.buf.Bytes()}
	ms := s.list()
	for _, m := range ms[min(len(ms), s.retain):] {
		delete(s.snaps, m.ID)
	}
	return nil
}

func (k *memSink) Cancel() error {
	if k.done {
		return fmt.Errorf("storage: snapshot %s: already closed", k.meta.ID)
	}
	k.done = true
	k.buf = bytes.Buffer{}
	return nil
}

func (s *MemSnapshotStore) list() []wire.SnapshotMeta {
	ms := make([]wire.SnapshotMeta, 0, len(s.snaps))
	for _, sn := range s.snaps {
		ms = append(ms, cloneMeta(sn.meta))
	}
	sortSnapshots(ms)
	return ms
}

// List implements SnapshotStore.
func (s *MemSnapshotStore) List() ([]wire.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(), nil
}

// Open implements SnapshotStore.
func (s *MemSnapshotStore) Open(id string) (wire.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snaps[id]
	if !ok {
		return wire.SnapshotMeta{}, nil, fmt.Errorf("storage: memory snapshots: snapshot %s: %w", id, wire.ErrNotFound)
	}
	m := cloneMeta(sn.meta)
	return m, newVerifyingReader(bytes.NewReader(sn.data), nil, "memory snapshot "+id, m), nil
}

// Verify reads a snapshot through and reports whether it is intact.
func (s *MemSnapshotStore) Verify(id string) error { return verifySnapshot(s, id) }

// Delete implements SnapshotStore.
func (s *MemSnapshotStore) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.snaps[id]; !ok {
		return fmt.Errorf("storage: memory snapshots: snapshot %s: %w", id, wire.ErrNotFound)
	}
	delete(s.snaps, id)
	return nil
}
