// Package kvdisk keeps a [kvfsm.KV] durable in a file of its own: an
// [fsm.DiskFSM], the smallest real one, for the log's tests, for the
// documentation, and for a state small enough to write whole at every
// Sync. A state of gigabytes keeps its data in a store that syncs in
// place instead (edictkv's bbolt store), under the same contract.
//
// The directory holds one file, "state": the KV's snapshot (kvfsm's
// format, which carries the revision — the index of the last entry
// applied — and a CRC-32C of every byte) as of the last Sync or Restore.
// What kvdisk guarantees, beyond kvfsm.KV's own guarantees:
//
//   - Apply changes the state in memory only; Sync writes it whole to a
//     new file, fsyncs it, renames it over "state" and fsyncs the
//     directory. So after a crash the store holds the state of exactly
//     the entries up to the last Sync (or Restore), never part of an
//     entry, and DurableIndex reports that index.
//   - Restore writes the stream to a new file while decoding it into a
//     new KV, and renames the file over "state" only once the stream has
//     decoded whole, checksum and end included: a damaged, truncated or
//     failing stream changes nothing, in memory or on disk, and a crash
//     leaves the old file or the new one.
//   - Open removes what a crash inside Sync or Restore left (files
//     named "state.tmp-*") and refuses a "state" file that does not
//     decode, naming it.
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
	"sync/atomic"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

const (
	stateFile = "state"
	tmpPrefix = "state.tmp-"
)

// KV is a kvfsm.KV whose state is durable in a directory. The log calls
// Apply, ApplyBatch, Snapshot, Restore, Sync and DurableIndex from one
// goroutine; Query, Get and Persist may run concurrently with them.
type KV struct {
	dir string
	kv  atomic.Pointer[kvfsm.KV]
	// durable is the revision "state" holds; unsure, that a failed
	// directory sync left "state" renamed but maybe not durable, so the
	// next Sync writes it again whatever durable says.
	durable uint64
	unsure  bool
}

var (
	_ fsm.DiskFSM  = (*KV)(nil)
	_ fsm.BatchFSM = (*KV)(nil)
	_ fsm.Querier  = (*KV)(nil)
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
// holds it already.
func (k *KV) Sync() (uint64, error) {
	kv := k.kv.Load()
	rev := kv.Revision()
	if rev == k.durable && !k.unsure {
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

// Snapshot implements fsm.FSM: kvfsm's snapshot, which carries the
// revision.
func (k *KV) Snapshot() (fsm.Snapshot, error) { return k.kv.Load().Snapshot() }

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

// replace writes a new "state" with write: into a new file, fsynced,
// renamed over the old one, the directory fsynced. On an error before the
// rename nothing changed; the new file is removed.
func (k *KV) replace(write func(io.Writer) error) (err error) {
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
	if err := os.Rename(f.Name(), filepath.Join(k.dir, stateFile)); err != nil {
		return err
	}
	renamed = true
	// Until the directory is synced, a crash may bring back the old file:
	// after an error here the next Sync writes the state in memory again.
	if err := syncDir(k.dir); err != nil {
		k.unsure = true
		return err
	}
	k.unsure = false
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
