package storage

import (
	"errors"
	"fmt"
	"os"
)

// Single-sync commits.
//
// bbolt's own commit syncs twice: the dirty pages, then the meta page that
// points to them, so that the meta page can never reach the disk before its
// pages. The store opens bbolt with NoSync and syncs once, after both
// (BoltStore.commit). That halves the device flushes of a commit, and it is
// safe because of three facts:
//
//  1. A transaction writes only pages that are free in the previous
//     transaction's tree (copy on write, and bbolt frees a page only once
//     the transaction that replaced it has committed), and it writes its
//     meta page into the other of the two meta slots. Whatever part of
//     transaction T+1 reaches the disk, the meta page and the tree of
//     transaction T stay intact — T was synced before T+1 began.
//  2. Nothing is acknowledged before the sync, so a crash can only cut
//     short a transaction that nobody was told about.
//  3. Open can tell a tree whose pages did not all arrive: every value
//     carries a CRC, the state record (rewritten in every transaction)
//     carries the log's bounds, the XOR of all value CRCs and the
//     transaction's id, and checkBoltFile and load verify all of it against
//     the pages. A page that did not arrive holds zeros, or an older
//     version of some page (freed pages are reused), or a mix after a torn
//     write: a bad page structure, a bad CRC, a gap or an extra entry, a
//     digest mismatch, or a state record of another transaction.
//
// So when the newest transaction does not verify, the file is what a crash
// during its commit leaves, and Open rolls it back: it copies the previous
// meta page over the newest one and opens again. It does so only when both
// meta pages are intact and their transactions consecutive, and only keeps
// the result if the previous transaction then verifies completely;
// otherwise the file is restored as it was and refused as corrupt.
//
// What it cannot tell apart: damage (bit rot) confined to exactly the pages
// of the newest transaction, after it was synced, looks the same and is
// rolled back too. Open logs every rollback with what failed, and Stats
// reports it. Any other damage is refused.

// checkStateTxid and rollbackTornCommits are off only in the negative
// controls of the power-loss test, which show that without either the test
// finds lost or unreadable commits.
var (
	checkStateTxid      = true
	rollbackTornCommits = true
)

// rollbackTorn is OpenBolt's answer to a file whose newest transaction did
// not verify (newestErr). See above.
func rollbackTorn(path string, o BoltOptions, newestErr error) (*BoltStore, error) {
	if !rollbackTornCommits {
		return nil, newestErr
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, newestErr
	}
	defer f.Close()
	// Hold bbolt's lock while deciding and writing: another process must
	// not open the file, or commit to it, in between.
	if err := lockExclusive(f, o.Timeout); err != nil {
		return nil, newestErr
	}
	m0, p0, raw0 := readMeta(f, 0)
	if p0 != "" {
		return nil, newestErr
	}
	ps := int64(m0.pageSize)
	m1, p1, raw1 := readMeta(f, ps)
	if p1 != "" || m1.pageSize != m0.pageSize {
		return nil, newestErr
	}
	newSlot, prevRaw, newest, prev := int64(1), raw0, m1, m0
	if m0.txid > m1.txid {
		newSlot, prevRaw, newest, prev = 0, raw1, m0, m1
	}
	if newest.txid != prev.txid+1 {
		return nil, newestErr
	}
	off := newSlot*ps + bPageHeaderSize
	saved := make([]byte, bMetaSize)
	if _, err := f.ReadAt(saved, off); err != nil {
		return nil, newestErr
	}
	// The meta struct does not hold its slot (the page header does, and
	// stays), so the previous meta copies over as it is. bbolt then sees
	// the previous transaction in both slots; its next commit, with the
	// torn one's id, overwrites this slot again.
	crashPoint("roll back: overwrite the newer meta")
	if err := writeAtSynced(f, prevRaw, off); err != nil {
		return nil, fmt.Errorf("%w; rolling back transaction %d: %v", newestErr, newest.txid, err)
	}
	// Open needs the lock for itself. A process that opens the file
	// before it finds the previous transaction in both slots, and checks
	// it just as this one does.
	unlock(f)
	crashPoint("roll back: reopen")
	s, err := openChecked(path, o)
	if err != nil {
		// Not a torn commit: put the file back as it was.
		if lerr := lockExclusive(f, o.Timeout); lerr != nil {
			return nil, fmt.Errorf("%w; the transaction before it (%d) does not verify either: %v; meta page %d could not be restored (%v) and holds a copy of meta page %d", newestErr, prev.txid, err, newSlot, lerr, 1-newSlot)
		}
		crashPoint("roll back: restore the newer meta")
		if rerr := writeAtSynced(f, saved, off); rerr != nil {
			return nil, fmt.Errorf("%w; the transaction before it (%d) does not verify either: %v; and restoring meta page %d failed: %v", newestErr, prev.txid, err, newSlot, rerr)
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("%w; the transaction before it (%d) does not verify either: %v", newestErr, prev.txid, err)
		}
		return nil, err
	}
	s.rolledBack = newest.txid
	o.Logger.Warn("storage: the newest transaction did not verify; taking it for a commit cut short by a crash (never acknowledged) and rolling it back",
		"path", path, "txid", newest.txid, "now", prev.txid, "problem", newestErr)
	return s, nil
}

// writeAtSynced writes b at off and makes it durable.
func writeAtSynced(f *os.File, b []byte, off int64) error {
	if _, err := f.WriteAt(b, off); err != nil {
		return err
	}
	return f.Sync()
}
