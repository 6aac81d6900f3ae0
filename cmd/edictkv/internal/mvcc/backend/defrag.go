package backend

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Defragmenter is a [Backend] that can give back the space its deletes
// freed: etcd's defragmentation. Both of this package's backends are.
//
// What Defrag guarantees: the database holds exactly what it held
// before — the same buckets, keys and values, the same committed state —
// in a Size that counts only what holds data (Size and SizeInUse are
// then about equal). Commits and new views wait while it runs; views
// begun before keep reading the database they began on. A crash at any
// point leaves either the old database or the new one, each whole. On
// error nothing changed.
type Defragmenter interface {
	Defrag() error
}

// defragTxBytes bounds the keys and values one transaction of the copy
// writes, so that a large database is not copied in one transaction held
// in memory.
const defragTxBytes = 64 << 20

// Defrag implements Defragmenter as etcd's backend.Defrag does: the
// committed database is copied, bucket by bucket and key by key, into a
// new file beside it (bbolt's Compact, which lays the pages out full),
// the new file is synced and renamed over the old one, and the directory
// is synced. The copy runs under the lock that commits take, so that it
// is the state of one commit and no commit is lost to the swap; the old
// database is closed once its last view is released.
func (b *Bolt) Defrag() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return ErrClosed
	case b.failed != nil:
		return b.failed
	}
	dir, base := filepath.Split(b.path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+defragInfix+"*")
	if err != nil {
		return fmt.Errorf("backend: defragment: %w", err)
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backend: defragment: %w", err)
	}
	// bbolt takes an empty file for a new database.
	db, err := openBoltDB(tmp, b.opts)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backend: defragment: %w", err)
	}
	fail := func(err error) error {
		db.Close()
		os.Remove(tmp)
		return fmt.Errorf("backend: defragment: %w", err)
	}
	if err := bolt.Compact(db, b.cur.db, defragTxBytes); err != nil {
		return fail(fmt.Errorf("copying the database: %w", err))
	}
	if !b.opts.NoSync {
		// Each of Compact's commits synced already; this covers a copy
		// of nothing but empty buckets, which commits nothing.
		if err := db.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, b.path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		// The new file is in place and open; only the rename's
		// durability is in doubt (see boltRestored.Install).
		b.failed = fmt.Errorf("backend: defragment: the directory could not be synced after the rename: %w", err)
	}
	old := b.cur
	b.cur = &boltDB{db: db}
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

// Defrag implements Defragmenter: a Memory keeps no free pages, but its
// Size is a high-water mark, as a bbolt file's is; defragmenting brings it
// down to what is in use.
func (m *Memory) Defrag() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return ErrClosed
	}
	m.highWater = m.inUse
	return nil
}
