// Package kvdisk keeps a [kvfsm.KV] durable in a file of its own: an
// [fsm.StagingFSM], the smallest real one, for the log's tests, for the
// documentation, and for a state small enough to write whole at every
// Sync. A state of gigabytes keeps its data in a store that syncs in
// place instead (edictkv's bbolt store), under the same contract.
//
// The directory holds the file "state": the KV's snapshot (kvfsm's
// format, which carries the revision — the index of the last entry
// applied — and a CRC-32C of every byte) as of the last Sync, Restore or
// InstallStaged; and, between a Stage and the InstallStaged or
// DiscardStaged after it, the file "staged", a snapshot in the same
// format. What kvdisk guarantees, beyond kvfsm.KV's own guarantees:
//
//   - Apply changes the state in memory only; Sync writes it whole to a
//     new file, fsyncs it, renames it over "state" and fsyncs the
//     directory. So after a crash the store holds the state of exactly
//     the entries up to the last Sync (or Restore, or InstallStaged),
//     never part of an entry, and DurableIndex reports that index.
//   - Restore writes the stream to a new file while decoding it into a
//     new KV, and renames the file over "state" only once the stream has
//     decoded whole, checksum and end included: a damaged, truncated or
//     failing stream changes nothing, in memory or on disk, and a crash
//     leaves the old file or the new one.
//   - Stage writes the stream the same way, renaming the file to
//     "staged" instead, so the received snapshot is written once;
//     InstallStaged renames "staged" over "state" (decoding it first if
//     this process did not stage it: a start after a crash). A snapshot is
//     its file: Snapshot syncs the state and Persist streams "state" as
//     it was then (fsm.SizedSnapshot), so that a peer is sent the file
//     itself and nothing is copied.
//   - Open removes what a crash inside Sync, Restore or Stage left (files
//     named "state.tmp-*"), keeps "staged" for the log to install or
//     discard, and refuses a "state" file that does not decode, naming
//     it.
//
// One process opens a directory at a time; kvdisk does not lock it.
package kvdisk

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

const (
	stateFile  = "state"
	stagedFile = "staged"
	tmpPrefix  = "state.tmp-"
)

// KV is a kvfsm.KV whose state is durable in a directory. The log calls
// Apply, ApplyBatch, Snapshot, Restore, Sync, DurableIndex,
// InstallStaged and DiscardStaged from one goroutine; Query, Get, Persist
// and Stage may run concurrently with them.
type KV struct {
	dir string
	kv  atomic.Pointer[kvfsm.KV]
	// durable is the revision "state" holds (0 too when there is no
	// "state", written reports whether there is); unsure, that a failed
	// directory sync left "state" renamed but maybe not durable, so the
	// next Sync writes it again whatever durable says.
	durable uint64
	written bool
	unsure  bool

	// staged is the KV decoded from "staged" by the Stage that wrote it,
	// so that InstallStaged need not decode it again.
	stageMu sync.Mutex
	staged  *kvfsm.KV
}

var (
	_ fsm.StagingFSM = (*KV)(nil)
	_ fsm.BatchFSM   = (*KV)(nil)
	_ fsm.Querier    = (*KV)(nil)
)

// Open opens the KV kept in dir, creating dir and an empty KV if there is
// none.
func Open(dir string) (*KV, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kvdisk: open %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kvdisk: open %s: %w", dir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("kvdisk: open %s: remove what a crash left: %w", dir, err)
			}
		}
	}
	k := &KV{dir: dir}
	kv := kvfsm.NewKV()
	f, err := os.Open(filepath.Join(dir, stateFile))
	k.written = err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("kvdisk: open %s: %w", dir, err)
	default:
		err = kv.Restore(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("kvdisk: open %s: %w", f.Name(), err)
		}
	}
	k.kv.Store(kv)
	k.durable = kv.Revision()
	return k, nil
}

// Apply implements fsm.FSM: in memory, durable at the next Sync.
func (k *KV) Apply(e fsm.Entry) any { return k.kv.Load().Apply(e) }

// ApplyBatch implements fsm.BatchFSM.
func (k *KV) ApplyBatch(es []fsm.Entry) []any { return k.kv.Load().ApplyBatch(es) }

// Query implements fsm.Querier (kvfsm's queries).
func (k *KV) Query(q []byte) ([]byte, error) { return k.kv.Load().Query(q) }

// Get returns key's state, if the key exists.
func (k *KV) Get(key string) (kvfsm.KeyValue, bool) { return k.kv.Load().Get(key) }

// Revision is the index of the last entry applied (or restored).
func (k *KV) Revision() uint64 { return k.kv.Load().Revision() }

// DurableIndex implements fsm.DiskFSM: the revision the file holds.
func (k *KV) DurableIndex() (uint64, error) { return k.durable, nil }

// Sync implements fsm.DiskFSM: it writes the state whole, unless the file
// holds it already (an empty state is no file).
func (k *KV) Sync() (uint64, error) { return k.sync(false) }

// sync is Sync; with file, an empty state is written too.
func (k *KV) sync(file bool) (uint64, error) {
	kv := k.kv.Load()
	rev := kv.Revision()
	if rev == k.durable && (k.written || !file && rev == 0) && !k.unsure {
		return rev, nil
	}
	s, err := kv.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("kvdisk: sync %s: %w", k.dir, err)
	}
	defer s.Release()
	if err := k.replace(s.Persist); err != nil {
		return 0, fmt.Errorf("kvdisk: sync %s at revision %d: %w", k.dir, rev, err)
	}
	k.durable = rev
	return rev, nil
}

// Snapshot implements fsm.FSM and fsm.SizedSnapshot: it syncs the state
// (a no-op if "state" holds it already) and captures "state", open, so
// that Persist streams the file as it is now even if a later Sync
// replaces it: kvfsm's snapshot, which carries the revision.
func (k *KV) Snapshot() (fsm.Snapshot, error) {
	if _, err := k.sync(true); err != nil {
		return nil, fmt.Errorf("kvdisk: snapshot %s: %w", k.dir, err)
	}
	f, err := os.Open(filepath.Join(k.dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("kvdisk: snapshot %s: %w", k.dir, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("kvdisk: snapshot %s: %w", k.dir, err)
	}
	return &fileSnapshot{f: f, size: fi.Size()}, nil
}

// fileSnapshot is "state" as Snapshot found it.
type fileSnapshot struct {
	f    *os.File
	size int64
}

func (s *fileSnapshot) Size() int64 { return s.size }

func (s *fileSnapshot) Persist(w io.Writer) error {
	n, err := io.Copy(w, io.NewSectionReader(s.f, 0, s.size))
	if err == nil && n != s.size {
		err = fmt.Errorf("%s ends after %d of its %d bytes", s.f.Name(), n, s.size)
	}
	if err != nil {
		return fmt.Errorf("kvdisk: persist: %w", err)
	}
	return nil
}

func (s *fileSnapshot) Release() { s.f.Close() }

// Restore implements fsm.FSM and the atomic, durable Restore of
// fsm.DiskFSM.
func (k *KV) Restore(r io.Reader) error {
	next := kvfsm.NewKV()
	err := k.replace(func(w io.Writer) error {
		// The stream is kept as it decodes: what reaches the file is what
		// the KV was checked against, to the stream's end.
		return next.Restore(io.TeeReader(r, w))
	})
	if err != nil {
		return fmt.Errorf("kvdisk: restore %s: %w", k.dir, err)
	}
	k.kv.Store(next)
	k.durable = next.Revision()
	return nil
}

// Stage implements fsm.StagingFSM: the stream is written to a new file
// while it decodes into a new KV, and the file, fsynced, is renamed to
// "staged" once the stream has decoded whole and carries index.
func (k *KV) Stage(index uint64, r io.Reader) error {
	next := kvfsm.NewKV()
	k.stageMu.Lock()
	defer k.stageMu.Unlock()
	// What was staged before goes first: a Stage that fails leaves
	// nothing staged.
	k.staged = nil
	if err := os.Remove(filepath.Join(k.dir, stagedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kvdisk: stage %s at %d: %w", k.dir, index, err)
	}
	err := k.write(stagedFile, func(w io.Writer) error {
		if err := next.Restore(io.TeeReader(r, w)); err != nil {
			return err
		}
		if rev := next.Revision(); rev != index {
			return fmt.Errorf("the snapshot carries index %d, not %d", rev, index)
		}
		return nil
	})
	var unsure errUnsure
	if errors.As(err, &unsure) {
		// Renamed, maybe not durably: what a Stage that fails leaves
		// staged is nothing.
		os.Remove(filepath.Join(k.dir, stagedFile))
	}
	if err != nil {
		return fmt.Errorf("kvdisk: stage %s at %d: %w", k.dir, index, err)
	}
	k.staged = next
	return nil
}

// InstallStaged implements fsm.StagingFSM: "staged" is renamed over
// "state" and the directory fsynced.
func (k *KV) InstallStaged(index uint64) error {
	k.stageMu.Lock()
	defer k.stageMu.Unlock()
	next := k.staged
	if next == nil || next.Revision() != index {
		var err error
		if next, err = k.readStaged(); err != nil {
			return fmt.Errorf("kvdisk: install the snapshot staged at %d in %s: %w", index, k.dir, err)
		}
	}
	if rev := next.Revision(); rev != index {
		return fmt.Errorf("kvdisk: install the snapshot staged at %d in %s: what is staged is at %d", index, k.dir, rev)
	}
	if err := os.Rename(filepath.Join(k.dir, stagedFile), filepath.Join(k.dir, stateFile)); err != nil {
		return fmt.Errorf("kvdisk: install the snapshot staged at %d in %s: %w", index, k.dir, err)
	}
	k.staged = nil
	k.kv.Store(next)
	k.durable, k.written = index, true
	// As in replace: until the directory is synced a crash may bring the
	// old file back, so the next Sync writes the state again.
	if err := syncDir(k.dir); err != nil {
		k.unsure = true
		return fmt.Errorf("kvdisk: install the snapshot staged at %d in %s: %w", index, k.dir, err)
	}
	k.unsure = false
	return nil
}

// readStaged decodes "staged", which a Stage before a restart wrote.
func (k *KV) readStaged() (*kvfsm.KV, error) {
	f, err := os.Open(filepath.Join(k.dir, stagedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("nothing is staged")
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := kvfsm.NewKV()
	if err := kv.Restore(bufio.NewReaderSize(f, 64<<10)); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return kv, nil
}

// DiscardStaged implements fsm.StagingFSM.
func (k *KV) DiscardStaged() error {
	k.stageMu.Lock()
	defer k.stageMu.Unlock()
	k.staged = nil
	if err := os.Remove(filepath.Join(k.dir, stagedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kvdisk: discard what is staged in %s: %w", k.dir, err)
	}
	return nil
}

// replace writes a new "state" with write: into a new file, fsynced,
// renamed over the old one, the directory fsynced. On an error before the
// rename nothing changed; the new file is removed.
func (k *KV) replace(write func(io.Writer) error) error {
	err := k.write(stateFile, write)
	var unsure errUnsure
	switch {
	case err == nil:
		k.unsure, k.written = false, true
	case errors.As(err, &unsure):
		k.unsure, k.written = true, true
	}
	return err
}

// errUnsure: the file is renamed into place, but the directory could not
// be synced, so a crash may undo the rename.
type errUnsure struct{ error }

func (e errUnsure) Unwrap() error { return e.error }

// write writes the file name in the directory with write: into a new
// file, fsynced, renamed to name, the directory fsynced. On an error
// before the rename nothing changed; the new file is removed.
func (k *KV) write(name string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(k.dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(k.dir, name)); err != nil {
		return err
	}
	renamed = true
	// Until the directory is synced, a crash may bring back the old file:
	// after an error here the next Sync writes the state in memory again.
	if err := syncDir(k.dir); err != nil {
		return errUnsure{err}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
