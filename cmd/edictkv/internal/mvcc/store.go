package mvcc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

var (
	// ErrCompacted is etcd's: the revision asked for is compacted away.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev is etcd's: the revision asked for is not made yet.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrKeyNotFound answers a put with IgnoreValue or IgnoreLease of a key
	// that does not exist, as etcd's apply does.
	ErrKeyNotFound = errors.New("mvcc: key not found")
	// ErrIndexApplied refuses a change whose log index is not above the
	// consistent index: the entry is applied already (or out of order).
	ErrIndexApplied = errors.New("mvcc: log index already applied")
	// ErrEmptyKey refuses a put of the empty key.
	ErrEmptyKey = errors.New("mvcc: empty key")
	// ErrClosed is returned by a closed store.
	ErrClosed = errors.New("mvcc: store closed")
	// ErrCorrupt wraps every error about stored data that the store could
	// not have written.
	ErrCorrupt = errors.New("mvcc: corrupt store")
)

// Defaults of Options, etcd's.
const (
	DefaultBatchLimit              = 10000
	DefaultBatchInterval           = 100 * time.Millisecond
	DefaultCompactionBatchLimit    = 1000
	DefaultCompactionSleepInterval = 10 * time.Millisecond
)

// Options configures a Store. The zero value is valid: etcd's batching and
// no background goroutines.
type Options struct {
	// BatchLimit is the number of pending backend changes at which the
	// write that reaches it commits them (default 10,000).
	BatchLimit int
	// Background starts the three goroutines a server wants: one commits
	// every BatchInterval while changes are pending, one performs
	// physical compaction, CompactionBatchLimit revisions at a time with
	// CompactionSleepInterval between batches, and one catches up
	// watchers and offers parked watch responses again (WatchStep).
	// Without it nothing runs on its own: the caller calls Commit,
	// CompactStep and WatchStep (the simulator's way; the store then
	// depends on no clock).
	Background bool
	// BatchInterval is the background committer's period (default 100 ms).
	BatchInterval time.Duration
	// CompactionBatchLimit is how many key-bucket entries one CompactStep
	// examines (default 1,000).
	CompactionBatchLimit int
	// CompactionSleepInterval is the background compactor's pause between
	// steps (default 10 ms), which lets writes in.
	CompactionSleepInterval time.Duration
	// WatchBuffer is the capacity, in responses, of each watch stream's
	// channel (default 128, etcd's).
	WatchBuffer int
	// WatchBatchLimit is how many key-bucket entries one catch-up step of
	// unsynced watchers reads, rounded up to a whole revision (default
	// 1,000).
	WatchBatchLimit int
}

func (o *Options) setDefaults() {
	if o.BatchLimit <= 0 {
		o.BatchLimit = DefaultBatchLimit
	}
	if o.BatchInterval <= 0 {
		o.BatchInterval = DefaultBatchInterval
	}
	if o.CompactionBatchLimit <= 0 {
		o.CompactionBatchLimit = DefaultCompactionBatchLimit
	}
	if o.CompactionSleepInterval <= 0 {
		o.CompactionSleepInterval = DefaultCompactionSleepInterval
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	if o.WatchBatchLimit <= 0 {
		o.WatchBatchLimit = DefaultWatchBatchLimit
	}
}

// Store is the multi-version key-value store. See the package
// documentation for what it guarantees.
type Store struct {
	be   backend.Backend
	opts Options

	// Lock order: a watch stream's mu, wmu, commitMu, compactMu, watch.mu,
	// then the short-held ones (bufMu, revMu, ix.mu, failMu), never two
	// of those at once.

	// wmu serializes changes: write transactions, compaction, commits'
	// sealing, Restore, Close.
	wmu sync.Mutex
	// commitMu serializes commits to the backend (and Snapshot's and
	// Restore's use of it). A background commit writes to the backend
	// holding it but not wmu, so writes go on meanwhile.
	commitMu sync.Mutex
	// compactMu is held shared by reads for their whole duration and
	// exclusively by index compaction and Restore's swap, which change
	// history that a read in flight may be walking.
	compactMu sync.RWMutex

	// revMu guards the revisions and the applied index.
	revMu sync.RWMutex
	// currentRev is the revision of the last completed write transaction;
	// 1 in an empty store, as etcd's.
	currentRev int64
	// compactRev is the last compaction's revision, -1 before any.
	compactRev int64
	// appliedIndex is the consistent index of the state in memory.
	appliedIndex uint64

	// durableIndex is the consistent index of the last committed layer.
	durableIndex atomic.Uint64

	ix *treeIndex

	// bufMu guards open and sealed (and writes into open).
	bufMu  sync.RWMutex
	open   *layer
	sealed []*layer

	// Guarded by wmu.
	job    *compactJob
	closed bool

	failMu sync.Mutex
	failed error

	// staged is the state Stage loaded, for InstallStaged.
	staged stagedState

	// watch holds the watchers (watchable.go).
	watch watchHub

	stop        chan struct{}
	stopOnce    sync.Once
	compactKick chan struct{}
	wg          sync.WaitGroup
}

// OpenFile opens (or creates) the store in the bbolt file at path.
func OpenFile(path string, bo backend.BoltOptions, o Options) (*Store, error) {
	be, err := backend.OpenBolt(path, bo)
	if err != nil {
		return nil, err
	}
	s, err := Open(be, o)
	if err != nil {
		be.Close()
		return nil, err
	}
	return s, nil
}

// Open opens the store kept in be, initializing an empty backend. It
// rebuilds the key index from the key bucket, checking every entry, and
// resumes a compaction that a crash interrupted. The store owns be from
// then on: Close closes it.
func Open(be backend.Backend, o Options) (*Store, error) {
	o.setDefaults()
	tx, err := be.Begin()
	if err != nil {
		return nil, fmt.Errorf("mvcc: open: %w", err)
	}
	st, err := load(tx)
	tx.Release()
	if err != nil {
		return nil, fmt.Errorf("mvcc: open: %w", err)
	}
	if st.fresh {
		b := &backend.Batch{}
		for _, name := range bucketNames {
			b.CreateBucket(name)
		}
		b.Put(bucketNames[bucketMeta], metaFormat, []byte(formatVersion))
		if err := be.Commit(b); err != nil {
			return nil, fmt.Errorf("mvcc: open: initializing the backend: %w", err)
		}
	}
	s := &Store{
		be:          be,
		opts:        o,
		open:        newLayer(),
		stop:        make(chan struct{}),
		compactKick: make(chan struct{}, 1),
	}
	s.install(st)
	s.watch.init(s.currentRev)
	if o.Background {
		s.wg.Add(3)
		go s.runCommitter()
		go s.runCompactor()
		go s.runWatchers()
		if s.job != nil {
			s.kickCompactor()
		}
	}
	return s, nil
}

// install makes a loaded state the store's, resuming its pending
// compaction. The caller holds every lock a reader or writer could hold,
// or is Open.
func (s *Store) install(st *loaded) {
	s.ix = st.ix
	s.currentRev, s.compactRev, s.appliedIndex = st.currentRev, st.compactRev, st.index
	s.durableIndex.Store(st.index)
	s.job = nil
	if st.hasPending {
		keep := s.ix.compact(st.pending)
		s.compactRev = st.pending
		s.job = newCompactJob(st.pending, keep, nil)
	}
}

// loaded is a store's state as read from a backend.
type loaded struct {
	fresh      bool
	ix         *treeIndex
	currentRev int64
	compactRev int64
	index      uint64
	// pending is a scheduled compaction not finished, if hasPending.
	pending    int64
	hasPending bool
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// load reads and checks a store's state from tx and rebuilds its index.
func load(tx backend.ReadTx) (*loaded, error) {
	have := 0
	for _, name := range bucketNames {
		if tx.HasBucket(name) {
			have++
		}
	}
	st := &loaded{ix: newTreeIndex(), currentRev: 1, compactRev: -1}
	if have == 0 {
		st.fresh = true
		return st, nil
	}
	for _, name := range bucketNames {
		if !tx.HasBucket(name) {
			return nil, corrupt("bucket %q is missing", name)
		}
	}
	meta := bucketNames[bucketMeta]
	if f := tx.Get(meta, metaFormat); string(f) != formatVersion {
		return nil, corrupt("meta %s is %q, want %q", metaFormat, f, formatVersion)
	}
	if v := tx.Get(meta, metaConsistentIndex); v != nil {
		x, err := decodeUint64("meta "+string(metaConsistentIndex), v)
		if err != nil {
			return nil, corrupt("%v", err)
		}
		st.index = x
	}
	var finished, scheduled int64 = -1, -1
	if v := tx.Get(meta, metaFinishedCompact); v != nil {
		r, err := decodeCompactRev(metaFinishedCompact, v)
		if err != nil {
			return nil, corrupt("%v", err)
		}
		finished, st.compactRev = r, r
	}
	if v := tx.Get(meta, metaScheduledCompact); v != nil {
		r, err := decodeCompactRev(metaScheduledCompact, v)
		if err != nil {
			return nil, corrupt("%v", err)
		}
		scheduled = r
	}
	if finished > scheduled {
		return nil, corrupt("compaction finished at %d beyond the one scheduled at %d", finished, scheduled)
	}
	maxKeyRev, err := rebuildIndex(tx, st.ix)
	if err != nil {
		return nil, err
	}
	var maxIdxRev int64
	var lastIndex uint64
	var idxErr error
	tx.Ascend(bucketNames[bucketRev], nil, nil, func(k, v []byte) bool {
		rev, err := decodeRevIndexKey(k)
		if err != nil {
			idxErr = corrupt("%v", err)
			return false
		}
		x, err := decodeUint64(fmt.Sprintf("revision bucket value at revision %d", rev), v)
		if err != nil {
			idxErr = corrupt("%v", err)
			return false
		}
		if x < lastIndex || x > st.index || x == 0 {
			idxErr = corrupt("revision %d made by log index %d: after %d, the consistent index is %d", rev, x, lastIndex, st.index)
			return false
		}
		maxIdxRev, lastIndex = rev, x
		return true
	})
	if idxErr != nil {
		return nil, idxErr
	}
	// As etcd: the newest revision may be compacted out of the key bucket
	// (a deletion), so the compaction marks bound it from below too.
	st.currentRev = max(1, maxKeyRev, finished, scheduled)
	if maxIdxRev != st.currentRev && (maxIdxRev != 0 || st.currentRev > 1) {
		return nil, corrupt("the revision bucket ends at revision %d, the store is at revision %d", maxIdxRev, st.currentRev)
	}
	if scheduled > finished {
		st.pending, st.hasPending = scheduled, true
	}
	return st, nil
}

// rebuildIndex builds the key index from the key bucket, as etcd's
// restore does, checking that each entry is one the store could have
// written after the ones before it. It returns the newest main revision.
func rebuildIndex(tx backend.ReadTx, ix *treeIndex) (int64, error) {
	var last Revision
	var err error
	tx.Ascend(bucketNames[bucketKey], nil, nil, func(k, v []byte) bool {
		rev, tomb, derr := decodeRevKey(k)
		if derr != nil {
			err = corrupt("key bucket: %v", derr)
			return false
		}
		if !rev.GreaterThan(last) {
			err = corrupt("key bucket: revision key %x repeats revision %d.%d", k, rev.Main, rev.Sub)
			return false
		}
		last = rev
		kv, derr := decodeValue(rev, tomb, v)
		if derr != nil {
			err = corrupt("key bucket entry %x: %v", k, derr)
			return false
		}
		ki := ix.lookup(kv.Key)
		if ki == nil {
			ki = &keyIndex{key: kv.Key}
			if tomb {
				ki.restoreTombstone(rev)
			} else {
				ki.restore(Revision{Main: kv.CreateRevision}, rev, kv.Version)
			}
			ix.insert(ki)
			return true
		}
		if tomb {
			if terr := ki.tombstone(rev); terr != nil {
				err = corrupt("key bucket entry %x: %v", k, terr)
				return false
			}
			return true
		}
		wantCreate, wantVer := ki.nextPut(rev.Main)
		if kv.Version != wantVer || kv.CreateRevision != wantCreate {
			err = corrupt("key bucket entry %x: key %q has version %d and create_revision %d, its history says %d and %d",
				k, kv.Key, kv.Version, kv.CreateRevision, wantVer, wantCreate)
			return false
		}
		if perr := ki.put(rev); perr != nil {
			err = corrupt("key bucket entry %x: %v", k, perr)
			return false
		}
		return true
	})
	return last.Main, err
}

// Rev is the current revision: that of the last completed write
// transaction (1 in an empty store).
func (s *Store) Rev() int64 {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	return s.currentRev
}

// CompactRev is the revision of the last compaction, -1 before any (as
// etcd's compactMainRev). Reads below it fail with ErrCompacted.
func (s *Store) CompactRev() int64 {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	return s.compactRev
}

// ConsistentIndex is the log index of the last change applied: the state
// in memory reflects every entry up to it.
func (s *Store) ConsistentIndex() uint64 {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	return s.appliedIndex
}

// DurableIndex is the consistent index of the state committed to the
// backend: after a crash the store reopens at it.
func (s *Store) DurableIndex() uint64 { return s.durableIndex.Load() }

// Size is the backend's size on disk, for etcd's quota (NOSPACE).
func (s *Store) Size() int64 { return s.be.Size() }

// SizeInUse is the part of Size that holds data; the rest is free pages
// left by compaction, which later writes reuse.
func (s *Store) SizeInUse() int64 { return s.be.SizeInUse() }

// KeyCount is the number of keys in the index: live keys and deleted keys
// whose history is not compacted away yet.
func (s *Store) KeyCount() int {
	s.compactMu.RLock()
	defer s.compactMu.RUnlock()
	return s.ix.len()
}

func (s *Store) failure() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failed
}

func (s *Store) fail(err error) error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failed == nil {
		s.failed = fmt.Errorf("mvcc: the store stopped writing after a failed commit: %w", err)
	}
	return s.failed
}

// writableLocked checks, under wmu, that a change at index may be made.
func (s *Store) writableLocked(index uint64) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	if applied := s.ConsistentIndex(); index <= applied {
		return fmt.Errorf("%w: index %d, consistent index %d", ErrIndexApplied, index, applied)
	}
	return nil
}

// setAppliedLocked records, under wmu, that the entry at index is applied.
func (s *Store) setAppliedLocked(index uint64) {
	s.bufMu.Lock()
	s.open.setApplied(index)
	s.bufMu.Unlock()
	s.revMu.Lock()
	s.appliedIndex = index
	s.revMu.Unlock()
}

// pendingOps is the number of changes not committed yet.
func (s *Store) pendingOps() int {
	s.bufMu.RLock()
	defer s.bufMu.RUnlock()
	n := s.open.ops
	for _, l := range s.sealed {
		n += l.ops
	}
	return n
}

// SetConsistentIndex records that the log entry at index is applied
// without changing any key, as for the log's own entries: the revision
// stays. index must be above ConsistentIndex.
func (s *Store) SetConsistentIndex(index uint64) error {
	tw, err := s.Write(index)
	if err != nil {
		return err
	}
	tw.End()
	return nil
}

// sealLocked, under wmu and commitMu, closes the open layer for commit and
// opens a new one. It returns nil when nothing is pending.
func (s *Store) sealLocked() *layer {
	s.bufMu.Lock()
	defer s.bufMu.Unlock()
	if s.open.ops == 0 {
		return nil
	}
	l := s.open
	l.index = s.ConsistentIndex()
	s.sealed = append(s.sealed, l)
	s.open = nextLayer(l)
	return l
}

// commitLayer, under commitMu, writes a sealed layer to the backend. A
// failure stops the store from writing: the layer stays readable, and
// every later change is refused.
func (s *Store) commitLayer(l *layer) error {
	if err := s.failure(); err != nil {
		return err
	}
	if l == nil {
		return nil
	}
	if err := s.be.Commit(l.batch()); err != nil {
		return s.fail(err)
	}
	s.bufMu.Lock()
	if i := bytesIndex(s.sealed, l); i >= 0 {
		s.sealed = append(s.sealed[:i:i], s.sealed[i+1:]...)
	}
	s.bufMu.Unlock()
	s.durableIndex.Store(l.index)
	return nil
}

func bytesIndex(ls []*layer, l *layer) int {
	for i, x := range ls {
		if x == l {
			return i
		}
	}
	return -1
}

// commitLocked commits everything pending, under wmu.
func (s *Store) commitLocked() error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.commitLayer(s.sealLocked())
}

// maybeCommitLocked commits, under wmu, once BatchLimit changes are
// pending. A failure is kept and refuses the next change.
func (s *Store) maybeCommitLocked() {
	s.bufMu.RLock()
	full := s.open.ops >= s.opts.BatchLimit
	s.bufMu.RUnlock()
	if full {
		s.commitLocked()
	}
}

// Commit writes every pending change to the backend now, and returns the
// consistent index that is durable. It waits for a write transaction in
// progress to end: never call it while holding one.
func (s *Store) Commit() (uint64, error) {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return s.DurableIndex(), ErrClosed
	}
	s.commitMu.Lock()
	l := s.sealLocked()
	// Writes may go on while the backend commits.
	s.wmu.Unlock()
	err := s.commitLayer(l)
	s.commitMu.Unlock()
	return s.DurableIndex(), err
}

func (s *Store) pending() bool {
	s.bufMu.RLock()
	defer s.bufMu.RUnlock()
	return s.open.ops > 0
}

func (s *Store) runCommitter() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.BatchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.pending() {
			s.Commit()
		}
	}
}

// Close stops the background goroutines, commits what is pending, closes
// every watch stream's channel, and closes the backend (which waits for
// open snapshots to be closed).
func (s *Store) Close() error {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil
	}
	s.wmu.Unlock()
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.wmu.Lock()
	err := s.commitLocked()
	s.closed = true
	s.wmu.Unlock()
	s.watch.close()
	if cerr := s.be.Close(); err == nil {
		err = cerr
	}
	return err
}
