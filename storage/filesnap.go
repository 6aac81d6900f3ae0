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
// CRC-32C). Data is streamed through SHA-256 in both directions, so
// snapshots may be larger than memory.
//
// A subfolder named "<id>" is a published snapshot, and it is complete
// whenever it exists, even right after a crash or a power loss:
//
//   - A snapshot is built in "<id>.tmp". Close fsyncs the data, the metadata
//     and the folder, renames it to "<id>" and fsyncs the parent, so the
//     rename cannot reach the disk before what it publishes, and the
//     snapshot survives a power loss once Close returns.
//   - A snapshot is removed (retention, Delete) by renaming "<id>" to
//     "<id>.removing" and fsyncing the parent before any file in it is
//     removed, so no crash leaves "<id>" with some of its files gone.
//
// A crash therefore leaves at most some "<id>.tmp" and "<id>.removing"
// folders besides the complete snapshots. List never reads them and
// NewFileSnapshotStore removes them. A "<id>" folder that is not complete
// has been damaged, and List and Open report it (ErrCorrupt) rather than
// leave it out.
//
// One process uses a folder at a time.
type FileSnapshotStore struct {
	dir    string
	retain int
	mu     sync.Mutex // serialises commits and retention
}

const (
	snapDataFile    = "data"
	snapMetaFile    = "meta"
	snapTmpExt      = ".tmp"      // a snapshot being written
	snapRemovingExt = ".removing" // a snapshot being removed
)

// NewFileSnapshotStore opens (creating if needed) the snapshot folder dir,
// keeping the newest retain snapshots. It removes what a crash left of
// snapshots being written or removed.
func NewFileSnapshotStore(dir string, retain int) (*FileSnapshotStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("%w: snapshot retention %d, want at least 1", ErrInvalid, retain)
	}
	_, err := os.Stat(dir)
	created := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: snapshots %s: %w", dir, err)
	}
	if created {
		// Snapshots published in a folder whose own name a power loss
		// takes away would be lost with it.
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("storage: snapshots %s: fsync parent: %w", dir, err)
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: snapshots %s: %w", dir, err)
	}
	for _, n := range names {
		if !isLeftover(n.Name()) {
			continue
		}
		if err := removeTree(filepath.Join(dir, n.Name()), "leftover "+n.Name()); err != nil {
			return nil, fmt.Errorf("storage: snapshots %s: remove %s, left by a snapshot being written or removed: %w", dir, n.Name(), err)
		}
	}
	return &FileSnapshotStore{dir: dir, retain: retain}, nil
}

// isLeftover reports whether name is the folder of a snapshot being written
// or removed.
func isLeftover(name string) bool {
	for _, ext := range []string{snapTmpExt, snapRemovingExt} {
		if id, ok := strings.CutSuffix(name, ext); ok && idPattern.MatchString(id) {
			return true
		}
	}
	return false
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
	crashPoint("snapshot " + meta.ID + ": create folder")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("storage: snapshot %s: %w", tmp, err)
	}
	crashPoint("snapshot " + meta.ID + ": create data")
	f, err := os.OpenFile(filepath.Join(tmp, snapDataFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		removeTree(tmp, "snapshot "+meta.ID)
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
	crashPoint("snapshot " + k.meta.ID + ": write data")
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
	published, err := k.commit()
	if err != nil {
		k.f.Close()
		if !published {
			removeTree(k.tmp, "snapshot "+k.meta.ID)
			return err
		}
		// Published, but the fsync that makes it durable failed: take it
		// back rather than leave visible a snapshot a power loss may undo.
		k.store.mu.Lock()
		defer k.store.mu.Unlock()
		if rerr := k.store.retire(k.meta.ID); rerr != nil {
			return fmt.Errorf("%w; withdrawing the snapshot failed too, so it may be listed: %v", err, rerr)
		}
		return err
	}
	if err := k.store.reap(); err != nil {
		return fmt.Errorf("snapshot %s is committed, but removing old snapshots failed: %w", k.meta.ID, err)
	}
	return nil
}

// commit makes the snapshot durable and publishes it; published says the
// rename happened, whatever the error.
func (k *fileSink) commit() (published bool, err error) {
	if k.err != nil {
		return false, k.err
	}
	crashPoint("snapshot " + k.meta.ID + ": fsync data")
	if err := k.f.Sync(); err != nil {
		return false, fmt.Errorf("storage: snapshot %s: fsync: %w", k.f.Name(), err)
	}
	if err := k.f.Close(); err != nil {
		return false, fmt.Errorf("storage: snapshot %s: %w", k.f.Name(), err)
	}
	k.meta.SHA256 = k.h.Sum(nil)
	rec, err := encodeSnapMeta(k.meta)
	if err != nil {
		return false, err
	}
	mf := filepath.Join(k.tmp, snapMetaFile)
	if err := writeSynced(mf, rec, "snapshot "+k.meta.ID); err != nil {
		return false, fmt.Errorf("storage: snapshot %s: %w", mf, err)
	}
	// The names "data" and "meta" must be durable before the folder is
	// published under its final name.
	crashPoint("snapshot " + k.meta.ID + ": fsync folder")
	if err := syncDir(k.tmp); err != nil {
		return false, fmt.Errorf("storage: snapshot %s: fsync: %w", k.tmp, err)
	}
	k.store.mu.Lock()
	defer k.store.mu.Unlock()
	final := filepath.Join(k.store.dir, k.meta.ID)
	crashPoint("snapshot " + k.meta.ID + ": publish")
	if err := os.Rename(k.tmp, final); err != nil {
		return false, fmt.Errorf("storage: snapshot %s: %w", final, err)
	}
	crashPoint("snapshot " + k.meta.ID + ": fsync parent")
	if err := syncDir(k.store.dir); err != nil {
		return true, fmt.Errorf("storage: snapshots %s: fsync: %w", k.store.dir, err)
	}
	return true, nil
}

// writeSynced writes the new file path durably; label names its steps for
// crashPoint.
func writeSynced(path string, b []byte, label string) error {
	crashPoint(label + ": write meta")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	crashPoint(label + ": fsync meta")
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
	if err := removeTree(k.tmp, "snapshot "+k.meta.ID); err != nil {
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
		if err := s.retire(m.ID); err != nil {
			return err
		}
	}
	return nil
}

// retire removes the published snapshot id; the caller holds mu. The rename
// to "<id>.removing" is made durable before any file in the folder is
// removed, so from then on the snapshot is gone, and a crash while its files
// are removed leaves a folder that List never reads and the next open
// removes. Were the files removed in place, a crash in between would leave a
// published folder without its metadata or data, indistinguishable from a
// damaged snapshot.
func (s *FileSnapshotStore) retire(id string) error {
	p := filepath.Join(s.dir, id)
	gone := p + snapRemovingExt
	crashPoint("snapshot " + id + ": retire")
	if err := os.Rename(p, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("storage: snapshots %s: snapshot %s: %w", s.dir, id, wire.ErrNotFound)
		}
		return fmt.Errorf("storage: snapshot %s: %w", p, err)
	}
	crashPoint("snapshot " + id + ": fsync parent")
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("storage: snapshots %s: fsync: %w", s.dir, err)
	}
	if err := removeTree(gone, "snapshot "+id); err != nil {
		return fmt.Errorf("storage: snapshot %s is removed, but deleting its files failed (opening the store deletes them): %w", id, err)
	}
	return nil
}

// removeTree removes the folder p and what it holds, one name at a time (so
// that tests can stop it in between). A p that does not exist is no error.
func removeTree(p, label string) error {
	names, err := os.ReadDir(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		crashPoint(label + ": remove")
		return os.RemoveAll(p)
	}
	for _, n := range names {
		crashPoint(label + ": remove " + n.Name())
		if err := os.RemoveAll(filepath.Join(p, n.Name())); err != nil {
			return err
		}
	}
	crashPoint(label + ": remove folder")
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List implements SnapshotStore.
func (s *FileSnapshotStore) List() ([]wire.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list()
}

// list reads every published snapshot's metadata. Snapshots being written
// or removed are not listed, and entries of the folder that are none of
// these are not the store's and are left alone.
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
	return s.retire(id)
}
