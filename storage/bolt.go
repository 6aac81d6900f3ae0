package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/wire"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// BoltStore is the Store on one bbolt file. Layout (format 1):
//
//	bucket "log":    key = index, 8 bytes big-endian (so byte order is index
//	                 order and appends go to the right edge of the B+tree);
//	                 value = EncodeEntry(e) ‖ crc32c(key ‖ encoding)
//	bucket "stable": key = the stable key; value = value ‖ crc32c(key ‖ value)
//	bucket "meta":   "format" → the format record
//	                 "state"  → first and last index, the stamp of entry
//	                 first-1, and an XOR of the CRCs of every log value and of
//	                 every stable value, framed like a stable value
//
// bbolt checksums only its meta pages. The per-value CRC catches damage to
// keys and values; the state record, rewritten in every transaction, catches
// entries that vanish or come back from an older page (a damaged pointer),
// because the count, the bounds and the XOR would no longer match. Open
// checks all of it, and checks the bbolt page structure itself before bbolt
// maps the file, since bbolt trusts its pages and panics or faults on a
// damaged one.
//
// Every write is one bbolt transaction made durable by one fdatasync after
// bbolt has written its pages and its meta page (bbolt's own commit syncs
// twice, to keep the meta page from reaching the disk before its pages).
// A crash during the sync can leave a meta page whose pages did not all
// arrive; Open detects that by the checks above and the transaction id in
// the state record, and rolls the never-acknowledged transaction back
// (bolt_rollback.go tells why that is safe). The freelist is not written
// (NoFreelistSync, hashmap freelist): it saves a page write per commit, and
// bbolt rebuilds the freelist at open while walking the file, which Open
// walks anyway. Past the used pages the file holds zero-filled blocks that
// keep commits from allocating (prealloc.go).
type BoltStore struct {
	path   string
	db     *bolt.DB
	opts   BoltOptions
	wmu    sync.Mutex // serialises write transactions and owns buf
	buf    []byte     // encoded entries of the batch being written
	keys   []byte     // their keys
	state  boltState  // as last committed; guarded by wmu
	failed error      // set when a commit failed; guarded by wmu

	pf          *os.File // for preallocation (prealloc.go); guarded by wmu
	zeroedTo    int64    // the file is zero-filled up to here past the used pages
	preallocErr error

	mu     sync.RWMutex // guards b and closed, for readers
	b      bounds
	closed bool

	fsyncs     atomic.Uint64
	fsyncTime  atomic.Int64
	fsyncMax   atomic.Int64
	pageWrites atomic.Uint64

	rolledBack uint64 // the torn transaction Open rolled back, or 0
}

// BoltOptions tunes a BoltStore. The zero value is the recommended setting.
type BoltOptions struct {
	// Timeout bounds the wait for the file lock another process holds; the
	// open then fails instead of hanging. 0 means 2 seconds.
	Timeout time.Duration
	// CompactChunk is the number of entries one compaction transaction
	// removes, so that appends wait at most one small transaction behind a
	// large compaction. 0 means 1024.
	CompactChunk int
	// FillPercent is how full bbolt packs a log page before splitting it.
	// Keys only ever grow (appends go to the right edge, truncation cuts
	// it), so a page is never filled in later and packing it full costs
	// nothing; bbolt's default of 0.5 would write twice the pages. 0 means
	// 1.0, the fullest bbolt allows.
	FillPercent float64
	// Preallocate is how many bytes of zero-filled blocks to keep ahead of
	// the pages bbolt uses, so that commits do not allocate blocks (see
	// prealloc.go). 0 means 4 MiB; negative turns it off.
	Preallocate int
	// InitialMmapSize is passed to bbolt: read transactions then never
	// block a commit that grows the file until it reaches this size.
	InitialMmapSize int
	// AllowMetaRollback opens a file one of whose two bbolt meta pages is
	// damaged, when the damage does not prove that page was the older one:
	// bbolt then uses the other, which loses the last committed transaction
	// if the damaged page was the newer. Without it such a file is refused.
	// It is for an operator who has decided to accept that loss.
	AllowMetaRollback bool
	// Logger receives warnings about repairs bbolt makes silently (a
	// damaged older meta page). nil means slog.Default().
	Logger *slog.Logger
}

func (o BoltOptions) withDefaults() BoltOptions {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.CompactChunk <= 0 {
		o.CompactChunk = 1024
	}
	if o.FillPercent <= 0 || o.FillPercent > 1 {
		o.FillPercent = 1
	}
	if o.Preallocate == 0 {
		o.Preallocate = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

var (
	bucketLog    = []byte("log")
	bucketStable = []byte("stable")
	bucketMeta   = []byte("meta")
	keyFormat    = []byte("format")
	keyState     = []byte("state")
)

// formatRecord identifies the file as an edictlog store of format 1.
var formatRecord = []byte("edictlog-storage\x01")

// OpenBolt opens the store in the file at path, creating it if it does not
// exist. It verifies the whole file first (see BoltStore); a damaged file is
// an error wrapping ErrCorrupt that names the file and the problem.
func OpenBolt(path string, opts *BoltOptions) (*BoltStore, error) {
	var o BoltOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := createBolt(path, o); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("storage: %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("storage: %s: not a regular file", path)
	case fi.Size() == 0:
		// createBolt never leaves an empty file at path, so this one was
		// truncated; bbolt would silently start a new database in it.
		return nil, corruptf(path, "file is empty (truncated?)")
	}
	s, err := openChecked(path, o)
	if errors.Is(err, ErrCorrupt) {
		return rollbackTorn(path, o, err)
	}
	return s, err
}

// openChecked verifies the file's pages, opens it with bbolt and verifies
// its contents against the state record.
func openChecked(path string, o BoltOptions) (*BoltStore, error) {
	info, err := checkBoltFileLocked(path, o.Timeout)
	if err != nil {
		return nil, err
	}
	if info.damagedMeta >= 0 {
		if !info.olderMetaDamaged && !o.AllowMetaRollback {
			return nil, corruptf(path, "meta page %d is damaged (%s) and may be the newer one; bbolt would fall back to meta page %d (txid %d) and lose the last committed transaction; set AllowMetaRollback to accept that",
				info.damagedMeta, info.metaErr, 1-info.damagedMeta, info.txid)
		}
		o.Logger.Warn("storage: damaged bbolt meta page, using the other one",
			"path", path, "page", info.damagedMeta, "problem", info.metaErr, "txid", info.txid, "older", info.olderMetaDamaged)
	}
	bo := boltOpenOptions(o)
	// commit syncs once, after bbolt has written the pages and the meta
	// page; see BoltStore and bolt_rollback.go.
	bo.NoSync = true
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		return nil, boltOpenError(path, err)
	}
	s := &BoltStore{path: path, db: db, opts: o}
	if err := s.load(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func boltOpenOptions(o BoltOptions) *bolt.Options {
	return &bolt.Options{
		Timeout:         o.Timeout,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: o.InitialMmapSize,
	}
}

func boltOpenError(path string, err error) error {
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("storage: %s: file is locked by another process (waited for the lock and gave up): %w", path, err)
	}
	return fmt.Errorf("storage: %s: open: %w", path, err)
}

// createBolt makes a new store at path atomically: bbolt initialises it
// under a temporary name, and a hard link publishes it only if path still
// does not exist, so a crash leaves either no file or a complete one, and
// two processes creating at once cannot replace each other's file. A crash
// may leave the temporary file; nothing reads it.
func createBolt(path string, o BoltOptions) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	crashPoint("create " + base + ": temporary file")
	f, err := os.CreateTemp(dir, base+".init-*")
	if err != nil {
		return fmt.Errorf("storage: %s: create: %w", path, err)
	}
	tmp := f.Name()
	f.Close()
	err = initAndLink(tmp, path, dir, o)
	crashPoint("create " + base + ": remove temporary file")
	os.Remove(tmp)
	return err
}

// initAndLink initialises a store in the file tmp, durably, and links it
// to path.
func initAndLink(tmp, path, dir string, o BoltOptions) error {
	crashPoint("create " + filepath.Base(path) + ": initialise")
	db, err := bolt.Open(tmp, 0o600, boltOpenOptions(o))
	if err != nil {
		return fmt.Errorf("storage: %s: create: %w", path, err)
	}
	// bbolt syncs the file after initialising it and after this
	// transaction (the temporary store is not opened with NoSync), so
	// the link below cannot publish a file whose pages are not on disk.
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLog, bucketStable, bucketMeta} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		if err := m.Put(keyFormat, frame(nil, keyFormat, formatRecord)); err != nil {
			return err
		}
		st := boltState{txid: uint64(tx.ID()), first: 1}
		return m.Put(keyState, st.encode(nil))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: %s: create: %w", path, err)
	}
	crashPoint("create " + filepath.Base(path) + ": link")
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("storage: %s: create: %w", path, err)
	}
	crashPoint("create " + filepath.Base(path) + ": fsync folder")
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("storage: %s: create: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Path returns the file the store is in.
func (s *BoltStore) Path() string { return s.path }

// Close implements LogStore. It waits for running transactions.
func (s *BoltStore) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	if s.pf != nil {
		s.pf.Close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: %s: close: %w", s.path, err)
	}
	return nil
}

// Stats implements LogStore.
func (s *BoltStore) Stats() (Stats, error) {
	b, err := s.bounds()
	if err != nil {
		return Stats{}, err
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return Stats{}, fmt.Errorf("storage: %s: %w", s.path, err)
	}
	return Stats{
		Path:       s.path,
		FileSize:   fi.Size(),
		FirstIndex: b.first,
		LastIndex:  b.last,
		Entries:    b.count(),
		Fsyncs:     s.fsyncs.Load(),
		FsyncTime:  time.Duration(s.fsyncTime.Load()),
		FsyncMax:   time.Duration(s.fsyncMax.Load()),
		PageWrites: s.pageWrites.Load(),
		RolledBack: s.rolledBack,
	}, nil
}

func (s *BoltStore) bounds() (bounds, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return bounds{}, ErrClosed
	}
	return s.b, nil
}

// FirstIndex implements LogStore.
func (s *BoltStore) FirstIndex() (uint64, error) {
	b, err := s.bounds()
	return b.first, err
}

// LastIndex implements LogStore.
func (s *BoltStore) LastIndex() (uint64, error) {
	b, err := s.bounds()
	return b.last, err
}

// Last implements LogStore.
func (s *BoltStore) Last() (wire.Position, error) {
	b, err := s.bounds()
	return b.position(), err
}

// errf wraps err with the file and what was being done.
func (s *BoltStore) errf(err error, format string, args ...any) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) || errors.Is(err, berrors.ErrTxClosed) {
		err = ErrClosed
	}
	return fmt.Errorf("storage: %s: %s: %w", s.path, fmt.Sprintf(format, args...), err)
}
