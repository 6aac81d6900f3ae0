package storage

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// FileSnapshotStore keeps snapshots in a folder, one subfolder per snapshot
// holding "data" and "meta" (the metadata record: version byte, msgpack,
// CRC-32C). A snapshot is built in "<id>.tmp"; Close fsyncs the data and
// the metadata, renames the folder to "<id>" and fsyncs the parent, so a
// crash leaves a snapshot either complete or absent (leftover ".tmp"
// folders are removed when the store is opened). Data is streamed through
// SHA-256 in both directions, so snapshots may be larger than memory.
//
// One process uses a folder at a time.
type FileSnapshotStore struct {
	dir    string
	retain int
	mu     sync.Mutex // serialises commits and retention
}

const (
	snapDataFile = "data"
	snapMetaFile = "meta"
	snapTmpExt   = ".tmp"
)

// NewFileSnapshotStore opens (creating if needed) the snapshot folder dir,
// keeping the newest retain snapshots.
func NewFileSnapshotStore(dir string, retain int) (*FileSnapshotStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("%w: snapshot retention %d, want at least 1", ErrInvalid, retain)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: snapshots %s: %w", dir, err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: snapshots %s: %w", dir, err)
	}
	for _, n := range names {
		if strings.HasSuffix(n.Name(), snapTmpExt) && idPattern.MatchString(strings.TrimSuffix(n.Name(), snapTmpExt)) {
			if err := os.RemoveAll(filepath.Join(dir, n.Name())); err != nil {
				return nil, fmt.Errorf("storage: snapshots %s: remove unfinished snapshot: %w", dir, err)
			}
		}
	}
	return &FileSnapshotStore{dir: dir, retain: retain}, nil
}

// Create implements SnapshotStore.
func (s *FileSnapshotStore) Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error) {
	if err := checkSnapshotMeta(&meta); err != nil {
		return nil, err
	}
	meta = cloneMeta(meta) // the caller may reuse its slices while we write
	meta.Created = time.Now()
	meta.ID = newSnapshotID(meta.Index, meta.Created)
	meta.Size, meta.SHA256 = 0, nil
	tmp := filepath.Join(s.dir, meta.ID+snapTmpExt)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("storage: snapshot %s: %w", tmp, err)
	}
	f, err := os.OpenFile(filepath.Join(tmp, snapDataFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("storage: snapshot %s: %w", tmp, err)
	}
	return &fileSink{store: s, meta: meta, tmp: tmp, f: f, h: sha256.New()}, nil
}

type fileSink struct {
	store *FileSnapshotStore
	meta  wire.SnapshotMeta
	tmp   string
	f     *os.File
	h     hash.Hash
	done  bool
	err   error // first write error; Close then fails
}

func (k *fileSink) ID() string { return k.meta.ID }

func (k *fileSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, fmt.Errorf("storage: snapshot %s: write after close", k.meta.ID)
	}
	if k.err != nil {
		return 0, k.err
	}
	n, err := k.f.Write(p)
	k.h.Write(p[:n])
	k.meta.Size += int64(n)
	if err != nil {
		k.err = fmt.Errorf("storage: snapshot %s: %w", k.f.Name(), err)
	}
	return n, k.err
}

// Close implements SnapshotSink: data and metadata are durable and the
// snapshot visible when it returns nil; otherwise nothing is.
func (k *fileSink) Close() error {
	if k.done {
		return fmt.Errorf("storage: snapshot %s: already closed", k.meta.ID)
	}
	k.done = true
	if err := k.commit(); err != nil {
		k.f.Close()
		os.RemoveAll(k.tmp)
		return err
	}
	if err := k.store.reap(); err != nil {
		return fmt.Errorf("snapshot %s is committed, but removing old snapshots failed: %w", k.meta.ID, err)
	}
	return nil
}

func (k *fileSink) commit() error {
	if k.err != nil {
		return k.err
	}
	if err := k.f.Sync(); err != nil {
		return fmt.Errorf("storage: snapshot %s: fsync: %w", k.f.Name(), err)
	}
	if err := k.f.Close(); err != nil {
		return fmt.Errorf("storage: snapshot %s: %w", k.f.Name(), err)
	}
	k.meta.SHA256 = k.h.Sum(nil)
	rec, err := encodeSnapMeta(k.meta)
	if err != nil {
		return err
	}
	mf := filepath.Join(k.tmp, snapMetaFile)
	if err := writeSynced(mf, rec); err != nil {
		return fmt.Errorf("storage: snapshot %s: %w", mf, err)
	}
	if err := syncDir(k.tmp); err != nil {
		return fmt.Errorf("storage: snapshot %s: fsync: %w", k.tmp, err)
	}
	k.store.mu.Lock()
	defer k.store.mu.Unlock()
	final := filepath.Join(k.store.dir, k.meta.ID)
	if err := os.Rename(k.tmp, final); err != nil {
		return fmt.Errorf("storage: snapshot %s: %w", final, err)
	}
	if err := syncDir(k.store.dir); err != nil {
		return fmt.Errorf("storage: snapshots %s: fsync: %w", k.store.dir, err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Cancel implements SnapshotSink.
func (k *fileSink) Cancel() error {
	if k.done {
		return fmt.Errorf("storage: snapshot %s: already closed", k.meta.ID)
	}
	k.done = true
	k.f.Close()
	if err := os.RemoveAll(k.tmp); err != nil {
		return fmt.Errorf("storage: snapshot %s: %w", k.tmp, err)
	}
	return nil
}

// reap removes the snapshots beyond the newest retain.
func (s *FileSnapshotStore) reap() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms, err := s.list()
	if err != nil {
		return err
	}
	for _, m := range ms[min(len(ms), s.retain):] {
		if err := os.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil {
			return fmt.Errorf("storage: snapshots %s: remove old snapshot: %w", s.dir, err)
		}
	}
	return nil
}

// List implements SnapshotStore.
func (s *FileSnapshotStore) List() ([]wire.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list()
}

// list reads every snapshot's metadata. Entries of the folder that are not
// snapshots (nor unfinished ones) are not the store's and are left alone.
func (s *FileSnapshotStore) list() ([]wire.SnapshotMeta, error) {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: snapshots %s: %w", s.dir, err)
	}
	var ms []wire.SnapshotMeta
	for _, n := range names {
		if !idPattern.MatchString(n.Name()) {
			continue
		}
		m, err := s.readMeta(n.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	sortSnapshots(ms)
	return ms, nil
}

func (s *FileSnapshotStore) readMeta(id string) (wire.SnapshotMeta, error) {
	if !idPattern.MatchString(id) {
		return wire.SnapshotMeta{}, fmt.Errorf("storage: snapshots %s: %q is not a snapshot id: %w", s.dir, id, wire.ErrNotFound)
	}
	path := filepath.Join(s.dir, id, snapMetaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(filepath.Join(s.dir, id)); errors.Is(derr, fs.ErrNotExist) {
			return wire.SnapshotMeta{}, fmt.Errorf("storage: snapshots %s: snapshot %s: %w", s.dir, id, wire.ErrNotFound)
		}
		return wire.SnapshotMeta{}, corruptf(path, "snapshot metadata is missing")
	}
	if err != nil {
		return wire.SnapshotMeta{}, fmt.Errorf("storage: %s: %w", path, err)
	}
	if len(b) > wire.MaxRecordSize+4 {
		return wire.SnapshotMeta{}, corruptf(path, "snapshot metadata of %d bytes", len(b))
	}
	m, err := decodeSnapMeta(b)
	if err != nil {
		return wire.SnapshotMeta{}, corruptf(path, "snapshot metadata: %v", err)
	}
	if m.ID != id {
		return wire.SnapshotMeta{}, corruptf(path, "snapshot metadata names snapshot %s", m.ID)
	}
	return m, nil
}

// Open implements SnapshotStore.
func (s *FileSnapshotStore) Open(id string) (wire.SnapshotMeta, io.ReadCloser, error) {
	// Under mu so that retention cannot remove the snapshot between reading
	// its metadata and opening its data; once open, the data stays readable.
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.readMeta(id)
	if err != nil {
		return wire.SnapshotMeta{}, nil, err
	}
	path := filepath.Join(s.dir, id, snapDataFile)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return wire.SnapshotMeta{}, nil, corruptf(path, "snapshot data is missing")
		}
		return wire.SnapshotMeta{}, nil, fmt.Errorf("storage: %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return wire.SnapshotMeta{}, nil, fmt.Errorf("storage: %s: %w", path, err)
	}
	if fi.Size() != m.Size {
		f.Close()
		return wire.SnapshotMeta{}, nil, corruptf(path, "snapshot data is %d bytes, its metadata says %d", fi.Size(), m.Size)
	}
	return m, newVerifyingReader(f, f, path, m), nil
}

// Verify reads a snapshot through and reports whether it is intact.
func (s *FileSnapshotStore) Verify(id string) error { return verifySnapshot(s, id) }

func verifySnapshot(s interface {
	Open(id string) (wire.SnapshotMeta, io.ReadCloser, error)
}, id string) error {
	_, r, err := s.Open(id)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// Delete implements SnapshotStore.
func (s *FileSnapshotStore) Delete(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("storage: snapshots %s: %q is not a snapshot id: %w", s.dir, id, wire.ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := filepath.Join(s.dir, id)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: snapshots %s: snapshot %s: %w", s.dir, id, wire.ErrNotFound)
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("storage: snapshot %s: %w", p, err)
	}
	return syncDir(s.dir)
}
