package storage

import (
	"bytes"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// load verifies the contents of a freshly opened file against its state
// record and fills the in-memory bounds. It reads every key and value once:
// checksums, contiguity, counts and digests. Entries are decoded only at the
// end of the log (for its stamp) and when read, so the cost is about one
// sequential read of the file, which bbolt's own open (rebuilding the
// freelist without NoFreelistSync's persisted copy) comes close to anyway.
func (s *BoltStore) load() error {
	tx, err := s.db.Begin(false)
	if err != nil {
		return s.errf(err, "begin")
	}
	defer tx.Rollback()
	logB, err := s.buckets(tx)
	if err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	if err := s.checkFormat(meta); err != nil {
		return err
	}
	st, err := decodeState(meta.Get(keyState))
	if err != nil {
		return corruptf(s.path, "state record: %v", err)
	}
	if st.txid != 0 && st.txid != uint64(tx.ID()) && checkStateTxid {
		return corruptf(s.path, "state record was written by transaction %d but the meta page is of transaction %d: pages of the last commit did not reach the disk", st.txid, tx.ID())
	}
	b := bounds{first: st.first, last: st.last}
	if b.base, err = st.base(); err != nil {
		return corruptf(s.path, "state record: %v", err)
	}
	if err := s.checkLog(logB, &st, &b); err != nil {
		return err
	}
	if err := s.checkStable(tx.Bucket(bucketStable), &st); err != nil {
		return err
	}
	s.state, s.b = st, b
	return nil
}

func (s *BoltStore) checkFormat(meta *bolt.Bucket) error {
	v := meta.Get(keyFormat)
	if v == nil {
		return corruptf(s.path, "no format record: not an edictlog store")
	}
	p, _, err := unframe(keyFormat, v)
	if err != nil {
		return corruptf(s.path, "format record: %v", err)
	}
	if !bytes.Equal(p, formatRecord) {
		return corruptf(s.path, "format record %q: not an edictlog store of a format this version reads (%q)", p, formatRecord)
	}
	// Nothing but the two records lives in meta.
	return s.onlyKeys(meta, "meta", keyFormat, keyState)
}

func (s *BoltStore) onlyKeys(bk *bolt.Bucket, name string, keys ...[]byte) error {
	return bk.ForEach(func(k, _ []byte) error {
		for _, want := range keys {
			if bytes.Equal(k, want) {
				return nil
			}
		}
		return corruptf(s.path, "unexpected key %q in bucket %q", k, name)
	})
}

func (s *BoltStore) checkLog(logB *bolt.Bucket, st *boltState, b *bounds) error {
	var digest uint32
	want := st.first
	var lastK, lastV []byte
	c := logB.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			return corruptf(s.path, "log key %x is a nested bucket", k)
		}
		if len(k) != 8 {
			return corruptf(s.path, "log key %x is not an 8-byte index", k)
		}
		if i := binary.BigEndian.Uint64(k); i != want {
			return corruptf(s.path, "log holds entry %d where entry %d should be (state record says entries %d..%d)", i, want, st.first, st.last)
		}
		_, sum, err := unframe(k, v)
		if err != nil {
			return corruptf(s.path, "log entry %d: %v", want, err)
		}
		digest ^= sum
		lastK, lastV = k, v
		want++
	}
	if want != st.last+1 {
		return corruptf(s.path, "log holds entries %d..%d but the state record says %d..%d: entries were lost", st.first, want-1, st.first, st.last)
	}
	if digest != st.logDigest {
		return corruptf(s.path, "log entries %d..%d do not match the state record's digest (%08x, computed %08x): some were replaced by older data", st.first, st.last, st.logDigest, digest)
	}
	b.lastStamp = b.base
	if lastK != nil {
		e, err := s.decodeValue(st.last, lastK, lastV)
		if err != nil {
			return err
		}
		b.lastStamp = e.Stamp
	}
	return nil
}

func (s *BoltStore) checkStable(sb *bolt.Bucket, st *boltState) error {
	var digest uint32
	err := sb.ForEach(func(k, v []byte) error {
		if v == nil {
			return corruptf(s.path, "stable key %q is a nested bucket", k)
		}
		if err := checkKey(string(k)); err != nil {
			return corruptf(s.path, "stable key %q: %v", k, err)
		}
		_, sum, err := unframe(k, v)
		if err != nil {
			return corruptf(s.path, "stable key %q: %v", k, err)
		}
		digest ^= sum
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return s.errf(err, "read stable bucket")
	}
	if digest != st.stableDigest {
		return corruptf(s.path, "stable records do not match the state record's digest (%08x, computed %08x): some were lost or replaced by older data", st.stableDigest, digest)
	}
	return nil
}
