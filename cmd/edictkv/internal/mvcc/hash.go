package mvcc

import (
	"fmt"
	"hash/crc32"
)

// KeyValueHash is etcd's HashKV answer.
type KeyValueHash struct {
	Hash            uint32
	CompactRevision int64
	Revision        int64
}

// HashByRev is etcd's HashKV: a CRC-32C of the key bucket's name and of
// its entries (revision key, stored value) up to rev (0: the current
// revision), counting, at or below the compaction revision, only the
// entries a compaction at rev keeps, and leaving out a tombstone at the
// compaction revision. Two stores with the same history and compaction
// revision hash alike whatever their physical compaction progress, and,
// the entries being etcd's own encoding, alike with etcd, with one
// deviation: etcd counts every entry at or below the compaction revision
// when nothing is kept (every key deleted), which makes its hash depend on
// how far its physical compaction went; this one filters always. It
// returns the current revision too.
func (s *Store) HashByRev(rev int64) (KeyValueHash, int64, error) {
	tr, err := s.Read()
	if err != nil {
		return KeyValueHash{}, 0, err
	}
	defer tr.End()
	compactRev, currentRev := tr.compactRev, tr.rev
	switch {
	case rev > 0 && rev < compactRev:
		return KeyValueHash{}, 0, ErrCompacted
	case rev > 0 && rev > currentRev:
		return KeyValueHash{}, currentRev, ErrFutureRev
	case rev <= 0:
		rev = currentRev
	}
	keep := s.ix.keep(rev)
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write(bucketNames[bucketKey])
	lower := Revision{Main: compactRev + 1}
	var scanErr error
	tr.v.ascend(bucketKey, nil, revKey(Revision{Main: rev + 1}, false), func(k, v []byte) bool {
		kr, tomb, err := decodeRevKey(k)
		if err != nil {
			scanErr = fmt.Errorf("%w: hash: key bucket: %v", ErrCorrupt, err)
			return false
		}
		if lower.GreaterThan(kr) {
			if _, ok := keep[kr]; !ok {
				return true
			}
		}
		if kr.Main == compactRev && tomb {
			return true
		}
		h.Write(k)
		h.Write(v)
		return true
	})
	if scanErr != nil {
		return KeyValueHash{}, currentRev, scanErr
	}
	return KeyValueHash{Hash: h.Sum32(), CompactRevision: compactRev, Revision: rev}, currentRev, nil
}

// RevisionIndex returns the log index of the entry that made revision rev.
// Revision 1, the empty store, was made by no entry: 0. It fails with
// ErrCompacted below CompactRev and ErrFutureRev above Rev.
func (s *Store) RevisionIndex(rev int64) (uint64, error) {
	tr, err := s.Read()
	if err != nil {
		return 0, err
	}
	defer tr.End()
	switch {
	case rev < tr.compactRev:
		return 0, ErrCompacted
	case rev > tr.rev:
		return 0, ErrFutureRev
	case rev <= 1:
		return 0, nil
	}
	v := tr.v.get(bucketRev, revIndexKey(rev))
	if v == nil {
		return 0, fmt.Errorf("%w: revision %d has no entry in the revision bucket", ErrCorrupt, rev)
	}
	x, err := decodeUint64(fmt.Sprintf("revision bucket value at revision %d", rev), v)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return x, nil
}
