package backend

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltOptions tunes a [Bolt] backend. The zero value is the production
// setting.
type BoltOptions struct {
	// InitialMmapSize is the address space reserved for the file (default
	// 10 GiB, as etcd). A file that outgrows it makes the next commit wait
	// until every open view is released while bbolt remaps it, so keep it
	// above the largest expected database. It is virtual memory, not RAM.
	InitialMmapSize int
	// NoSync skips fsync on commit. For tests and benchmarks only: a
	// machine crash can then lose or corrupt committed batches.
	NoSync bool
}

// DefaultInitialMmapSize is BoltOptions.InitialMmapSize's default.
const DefaultInitialMmapSize = 10 << 30

// lockTimeout bounds how long Open waits for the file lock: another
// process holding it is a misconfiguration to report, not to wait out.
const lockTimeout = 2 * time.Second

// Bolt is a [Backend] on a bbolt file. Commits fsync the file (unless
// BoltOptions.NoSync). Restore writes the new database to a temporary file
// in the same directory ("<file>.restore-*"), fsyncs it, checks it, and
// installs it by renaming it over the file and fsyncing the directory;
// Stage renames it to "<file>.staged" first (and fsyncs the directory),
// where a restart finds it. So a received snapshot is written once: the
// file it arrives in becomes the database. OpenBolt removes the temporary
// files a crash left, and keeps the staged one.
type Bolt struct {
	path string
	opts BoltOptions

	// mu guards cur, closed, failed and staged; Commit and Begin hold it
	// shared, Install, Stage and Close exclusively.
	mu     sync.RWMutex
	cur    *boltDB
	closed bool
	failed error
	// staged is the staged database, once opened.
	staged *boltRestored

	size, sizeInUse atomic.Int64

	// retired counts replaced databases still open for their views.
	retired sync.WaitGroup

	// sharedMu guards shared and committing. shared is the read
	// transaction of cur that views begun since the last commit share
	// (nil: the next Begin starts one); committing counts the Commits
	// under way, during which Begin gives each view a transaction of its
	// own (see Begin).
	sharedMu   sync.Mutex
	shared     *boltRead
	committing int
}

// boltDB is one open bbolt database and the views still reading it: a
// database replaced by Restore is closed once its last view is released.
type boltDB struct {
	db    *bolt.DB
	views sync.WaitGroup
}

// Suffixes of the files beside a Bolt's file.
const (
	restoreInfix = ".restore-" // a Restore's database being written
	defragInfix  = ".defrag-"  // a Defrag's database being written
	stagedSuffix = ".staged"   // the staged database
)

// OpenBolt opens the bbolt file at path, creating it if it does not exist.
// It removes what a crash left of Restores cut short.
func OpenBolt(path string, o BoltOptions) (*Bolt, error) {
	if o.InitialMmapSize <= 0 {
		o.InitialMmapSize = DefaultInitialMmapSize
	}
	if err := removeLeftovers(path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		// A file cut short would fault when bbolt maps pages past its end.
		if err := verifyBoltFile(path, false); err != nil {
			return nil, err
		}
	}
	db, err := openBoltDB(path, o)
	if err != nil {
		return nil, err
	}
	b := &Bolt{path: path, opts: o, cur: &boltDB{db: db}}
	b.updateSizes(b.cur)
	return b, nil
}

// removeLeftovers removes the temporary files of Restores a crash cut
// short (and of Defrags, which write theirs the same way).
func removeLeftovers(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("backend: open %s: %w", path, err)
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, base+restoreInfix) || strings.HasPrefix(n, base+defragInfix) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("backend: open %s: remove %s, left by a crash: %w", path, n, err)
			}
		}
	}
	return nil
}

func openBoltDB(path string, o BoltOptions) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         lockTimeout,
		InitialMmapSize: o.InitialMmapSize,
		NoSync:          o.NoSync,
		NoGrowSync:      o.NoSync,
		// As etcd: the freelist is rebuilt at open instead of being
		// rewritten by every commit, and kept in a hashmap.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("backend: open %s: %w", path, err)
	}
	return db, nil
}

// verifyBoltFile checks that the file holds a whole bbolt database before
// it is opened for writing: the size its meta page claims is there, and,
// when deep, every page of every bucket reads as what it claims to be.
// bbolt asserts by panicking, and a damaged page can point outside the
// mapped file, so the walk runs with faults turned into panics and
// recovers them. (bbolt's own Check is not used: it first rebuilds the
// freelist in a goroutine of its own, where a damaged page's panic cannot
// be recovered.)
func verifyBoltFile(path string, deep bool) (err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("backend: %s is corrupt: %v", path, r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return fmt.Errorf("backend: %s is not a bbolt database: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if need := tx.Size(); need > fi.Size() {
			return fmt.Errorf("backend: %s is truncated: it holds %d bytes, its database needs %d", path, fi.Size(), need)
		}
		if !deep {
			return nil
		}
		// Every byte of every key and value is read: a damaged length
		// makes them reach past the file's end, which faults (recovered).
		h := crc32.NewIEEE()
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			var last []byte
			c := bk.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				h.Write(k)
				h.Write(v)
				if last != nil && bytes.Compare(k, last) <= 0 {
					return fmt.Errorf("backend: %s is corrupt: bucket %q: key %x after %x", path, name, k, last)
				}
				last = k
			}
			touched ^= h.Sum32()
			return nil
		})
	})
}

// touched is where verifyBoltFile's reads go, so that the compiler keeps
// them.
var touched uint32

// openChecked opens a database file that verifyBoltFile passed, turning
// a panic of bbolt's freelist rebuild into an error.
func openChecked(path string, o BoltOptions) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("backend: %s is corrupt: %v", path, r)
		}
	}()
	return openBoltDB(path, o)
}

func (b *Bolt) updateSizes(d *boltDB) {
	_ = d.db.View(func(tx *bolt.Tx) error {
		size := tx.Size()
		free := int64(d.db.Stats().FreePageN) * int64(d.db.Info().PageSize)
		b.size.Store(size)
		b.sizeInUse.Store(size - free)
		return nil
	})
}

// Begin implements Backend. The views begun between two commits share
// one bbolt read transaction, as etcd's backend shares one between its
// reads: a view costs a reference, where a transaction of its own would
// take the database's locks and allocate at its begin and its end, under
// every read. The transaction ends with its last view, once a commit has
// replaced it. While a Commit is under way each view gets a transaction
// of its own, released with it: the commit may have to wait for every
// open transaction (bbolt remaps a file that outgrew its mapping under
// an exclusive lock), and it must not wait for one the backend itself
// keeps open.
func (b *Bolt) Begin() (ReadTx, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.sharedMu.Lock()
	defer b.sharedMu.Unlock()
	if b.committing > 0 {
		return beginBolt(b.cur)
	}
	if b.shared == nil {
		r, err := readBolt(b.cur)
		if err != nil {
			return nil, err
		}
		r.refs.Add(1) // the backend's own, until a commit replaces it
		b.shared = r
	}
	b.shared.refs.Add(1)
	return &boltTx{r: b.shared}, nil
}

// dropShared gives up the backend's reference to the shared read
// transaction: views begun from now on get a newer one.
func (b *Bolt) dropShared() {
	b.sharedMu.Lock()
	r := b.shared
	b.shared = nil
	b.sharedMu.Unlock()
	if r != nil {
		r.unref()
	}
}

// boltRead is a bbolt read transaction and the references its views
// hold: it is rolled back when the last one is released.
type boltRead struct {
	tx *bolt.Tx
	d  *boltDB
	// buckets holds every bucket of tx, opened once: a bbolt read
	// transaction opens a bucket anew (a search and an allocation) at
	// every Tx.Bucket.
	buckets map[string]*bolt.Bucket
	refs    atomic.Int64
}

// readBolt begins a read transaction of d, with no reference yet.
func readBolt(d *boltDB) (*boltRead, error) {
	d.views.Add(1)
	tx, err := d.db.Begin(false)
	if err != nil {
		d.views.Done()
		return nil, fmt.Errorf("backend: begin: %w", err)
	}
	r := &boltRead{tx: tx, d: d, buckets: map[string]*bolt.Bucket{}}
	_ = tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
		r.buckets[string(name)] = bk
		return nil
	})
	return r, nil
}

func (r *boltRead) unref() {
	if r.refs.Add(-1) == 0 {
		_ = r.tx.Rollback()
		r.d.views.Done()
	}
}

// beginBolt begins a view of d with a read transaction of its own.
func beginBolt(d *boltDB) (ReadTx, error) {
	r, err := readBolt(d)
	if err != nil {
		return nil, err
	}
	r.refs.Add(1)
	return &boltTx{r: r}, nil
}

// Commit implements Backend.
func (b *Bolt) Commit(batch *Batch) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	if b.failed != nil {
		return b.failed
	}
	d := b.cur
	b.sharedMu.Lock()
	b.committing++
	b.sharedMu.Unlock()
	b.dropShared()
	defer func() {
		b.sharedMu.Lock()
		b.committing--
		b.sharedMu.Unlock()
	}()
	err := d.db.Update(func(tx *bolt.Tx) error {
		for _, o := range batch.ops {
			switch o.kind {
			case opCreateBucket:
				if _, err := tx.CreateBucketIfNotExists(o.bucket); err != nil {
					return fmt.Errorf("create bucket %q: %w", o.bucket, err)
				}
			case opPut:
				bk := tx.Bucket(o.bucket)
				if bk == nil {
					return fmt.Errorf("put into missing bucket %q", o.bucket)
				}
				// Package mvcc's buckets grow at their end: fuller
				// pages waste less.
				bk.FillPercent = 0.9
				if err := bk.Put(o.key, o.value); err != nil {
					return fmt.Errorf("put %q in bucket %q: %w", o.key, o.bucket, err)
				}
			case opDelete:
				if bk := tx.Bucket(o.bucket); bk != nil {
					if err := bk.Delete(o.key); err != nil {
						return fmt.Errorf("delete %q in bucket %q: %w", o.key, o.bucket, err)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("backend: commit: %w", err)
	}
	b.updateSizes(d)
	return nil
}

// Size implements Backend.
func (b *Bolt) Size() int64 { return b.size.Load() }

// SizeInUse implements Backend.
func (b *Bolt) SizeInUse() int64 { return b.sizeInUse.Load() }

// Path is the database file's path.
func (b *Bolt) Path() string { return b.path }

// Restore implements Backend.
func (b *Bolt) Restore(r io.Reader) (Restored, error) {
	dir, base := filepath.Split(b.path)
	if dir == "" {
		dir = "."
	}
	crashPoint("restore: create")
	f, err := os.CreateTemp(dir, base+restoreInfix+"*")
	if err != nil {
		return nil, fmt.Errorf("backend: restore: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) (Restored, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	crashPoint("restore: write")
	tw := &trailerWriter{w: f, h: crc32.New(castagnoli)}
	if _, err := io.Copy(tw, r); err != nil {
		return fail(fmt.Errorf("backend: restore: reading the snapshot stream: %w", err))
	}
	if err := tw.check(); err != nil {
		return fail(fmt.Errorf("backend: restore: %w", err))
	}
	crashPoint("restore: fsync")
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("backend: restore: %w", err))
	}
	if err := f.Close(); err != nil {
		return fail(fmt.Errorf("backend: restore: %w", err))
	}
	if err := verifyBoltFile(tmp, true); err != nil {
		return fail(fmt.Errorf("backend: restore: the snapshot stream is not a whole database: %w", err))
	}
	db, err := openChecked(tmp, b.opts)
	if err != nil {
		return fail(err)
	}
	return &boltRestored{b: b, file: tmp, d: &boltDB{db: db}}, nil
}

// Staged implements Backend.
func (b *Bolt) Staged() (Restored, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.staged != nil {
		return b.staged, nil
	}
	p := b.path + stagedSuffix
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotStaged
		}
		return nil, fmt.Errorf("backend: staged database: %w", err)
	}
	// Verified when it was staged, and fsynced since: verified again, as
	// a file read back from the disk after a crash.
	if err := verifyBoltFile(p, true); err != nil {
		return nil, fmt.Errorf("backend: staged database: %w", err)
	}
	db, err := openChecked(p, b.opts)
	if err != nil {
		return nil, fmt.Errorf("backend: staged database: %w", err)
	}
	b.staged = &boltRestored{b: b, file: p, d: &boltDB{db: db}}
	return b.staged, nil
}

// DiscardStaged implements Backend.
func (b *Bolt) DiscardStaged() error {
	b.mu.Lock()
	st := b.staged
	b.staged = nil
	b.mu.Unlock()
	if st != nil {
		st.close()
	}
	crashPoint("discard staged")
	if err := os.Remove(b.path + stagedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backend: discard the staged database: %w", err)
	}
	return nil
}

// boltRestored is a database Restore built, in file: a temporary file, or
// the staged one.
type boltRestored struct {
	b    *Bolt
	file string
	d    *boltDB
	done bool
}

func (r *boltRestored) Begin() (ReadTx, error) {
	if r.done {
		return nil, ErrClosed
	}
	return beginBolt(r.d)
}

func (r *boltRestored) Stage() error {
	if r.done {
		return errors.New("backend: restore already installed or discarded")
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	staged := b.path + stagedSuffix
	if r.file == staged {
		return nil
	}
	prev := b.staged
	crashPoint("stage: rename")
	if err := os.Rename(r.file, staged); err != nil {
		return fmt.Errorf("backend: stage the restored database: %w", err)
	}
	r.file, b.staged = staged, r
	if prev != nil {
		prev.close() // its file was replaced
	}
	// The rename must be durable before anyone relies on what is staged.
	crashPoint("stage: fsync dir")
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		b.staged = nil
		os.Remove(staged)
		r.file = "" // nothing to remove any more; Discard closes it
		return fmt.Errorf("backend: stage the restored database: %w", err)
	}
	return nil
}

func (r *boltRestored) Install() error {
	if r.done {
		return errors.New("backend: restore already installed or discarded")
	}
	if r.file == "" {
		r.Discard()
		return errors.New("backend: restore: the restored database's file is gone")
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	// A staged database stays staged when it cannot be installed: a
	// restart installs it.
	failed := func(err error) error {
		if b.staged != r {
			r.discardLocked()
		}
		return err
	}
	if b.closed {
		return failed(ErrClosed)
	}
	crashPoint("install: rename")
	if err := os.Rename(r.file, b.path); err != nil {
		return failed(fmt.Errorf("backend: restore: %w", err))
	}
	r.done = true
	if b.staged == r {
		b.staged = nil
	}
	crashPoint("install: fsync dir")
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		// The new file is in place and open; only the rename's
		// durability is in doubt. Refuse further commits, so that nothing
		// is acknowledged as durable on top of it.
		b.failed = fmt.Errorf("backend: restore: the directory could not be synced after the rename: %w", err)
	}
	old := b.cur
	b.cur = r.d
	b.dropShared()
	b.updateSizes(b.cur)
	b.retired.Add(1)
	go func() {
		defer b.retired.Done()
		old.views.Wait()
		old.db.Close()
	}()
	return nil
}

func (r *boltRestored) Discard() {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	r.discardLocked()
}

func (r *boltRestored) discardLocked() {
	if r.done {
		return
	}
	if r.b.staged == r {
		r.b.staged = nil
	}
	r.close()
	if r.file != "" {
		os.Remove(r.file)
	}
}

// close closes the restored database, leaving its file.
func (r *boltRestored) close() {
	if r.done {
		return
	}
	r.done = true
	r.d.views.Wait()
	r.d.db.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close implements Backend. It waits for every view to be released.
func (b *Bolt) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	d, st := b.cur, b.staged
	b.staged = nil
	b.mu.Unlock()
	b.dropShared()
	if st != nil {
		st.close() // it stays staged, for the next open
	}
	d.views.Wait()
	b.retired.Wait()
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("backend: close: %w", err)
	}
	return nil
}

// boltTx is a view: a reference to a read transaction, shared or its
// own (see Bolt.Begin).
type boltTx struct {
	r        *boltRead
	released bool
}

func (t *boltTx) bucket(name []byte) *bolt.Bucket { return t.r.buckets[string(name)] }

func (t *boltTx) HasBucket(bucket []byte) bool { return t.bucket(bucket) != nil }

func (t *boltTx) Get(bucket, key []byte) []byte {
	bk := t.bucket(bucket)
	if bk == nil {
		return nil
	}
	return bk.Get(key)
}

func (t *boltTx) Ascend(bucket, from, to []byte, fn func(k, v []byte) bool) {
	bk := t.bucket(bucket)
	if bk == nil {
		return
	}
	c := bk.Cursor()
	var k, v []byte
	if from == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil && (to == nil || bytes.Compare(k, to) < 0); k, v = c.Next() {
		if !fn(k, v) {
			return
		}
	}
}

// WriteTo writes the database file as bbolt's Tx.WriteTo does, then a
// trailer (see boltTrailerLen) that lets Restore check every byte.
func (t *boltTx) WriteTo(w io.Writer) (int64, error) {
	h := crc32.New(castagnoli)
	n, err := t.r.tx.WriteTo(io.MultiWriter(w, h))
	if err != nil {
		return n, err
	}
	m, err := w.Write(boltTrailer(n, h.Sum32()))
	return n + int64(m), err
}

func (t *boltTx) Size() int64 { return t.r.tx.Size() + boltTrailerLen }

// A Bolt snapshot stream is the database file followed by a trailer: a
// magic, the file's length and its CRC-32C, so that a stream cut short or
// damaged anywhere, even in a value no structure check can judge, is
// refused.
const (
	boltTrailerMagic = "edkvbolt"
	boltTrailerLen   = 8 + 8 + 4
)

func boltTrailer(n int64, sum uint32) []byte {
	b := append([]byte(boltTrailerMagic), make([]byte, 12)...)
	binary.BigEndian.PutUint64(b[8:], uint64(n))
	binary.BigEndian.PutUint32(b[16:], sum)
	return b
}

// trailerWriter passes on everything but the last boltTrailerLen bytes
// written to it, hashing what it passes.
type trailerWriter struct {
	w    io.Writer
	h    hash.Hash32
	n    int64
	tail []byte
}

func (t *trailerWriter) Write(p []byte) (int, error) {
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - boltTrailerLen; over > 0 {
		if _, err := t.w.Write(t.tail[:over]); err != nil {
			return 0, err
		}
		t.h.Write(t.tail[:over])
		t.n += int64(over)
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return len(p), nil
}

// check verifies the trailer once the stream has ended.
func (t *trailerWriter) check() error {
	if len(t.tail) < boltTrailerLen || string(t.tail[:8]) != boltTrailerMagic {
		return fmt.Errorf("the stream does not end with a snapshot trailer: cut short, or not a snapshot")
	}
	if n := int64(binary.BigEndian.Uint64(t.tail[8:])); n != t.n {
		return fmt.Errorf("the trailer says %d bytes of database, the stream holds %d", n, t.n)
	}
	if sum := binary.BigEndian.Uint32(t.tail[16:]); sum != t.h.Sum32() {
		return fmt.Errorf("checksum %08x, the database sums to %08x", sum, t.h.Sum32())
	}
	return nil
}

func (t *boltTx) Release() {
	if t.released {
		return
	}
	t.released = true
	t.r.unref()
}
