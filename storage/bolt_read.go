package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/edictlog/edictlog/wire"
	bolt "go.etcd.io/bbolt"
)

// decodeValue checks a framed log value and decodes it, naming the file and
// the entry in errors. The entry does not alias v.
func (s *BoltStore) decodeValue(i uint64, k, v []byte) (wire.Entry, error) {
	p, _, err := unframe(k, v)
	if err != nil {
		return wire.Entry{}, corruptf(s.path, "log entry %d: %v", i, err)
	}
	e, err := wire.DecodeEntry(p)
	if err != nil {
		return wire.Entry{}, corruptf(s.path, "log entry %d: %v", i, err)
	}
	if e.Index != i {
		return wire.Entry{}, corruptf(s.path, "log entry %d: holds index %d", i, e.Index)
	}
	return e, nil
}

// readEntry reads entry i in tx.
func (s *BoltStore) readEntry(logB *bolt.Bucket, i uint64) (wire.Entry, error) {
	k := indexKey(nil, i)
	v := logB.Get(k)
	if v == nil {
		return wire.Entry{}, corruptf(s.path, "log entry %d is missing", i)
	}
	return s.decodeValue(i, k, v)
}

// Entries implements LogStore. The bounds are read from the state record in
// the same read transaction as the entries, so a compaction or truncation
// committing meanwhile cannot make a missing entry look like damage.
func (s *BoltStore) Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error) {
	tx, err := s.readTx()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	logB := tx.Bucket(bucketLog)
	st, err := decodeState(tx.Bucket(bucketMeta).Get(keyState))
	if err != nil {
		return nil, corruptf(s.path, "state record: %v", err)
	}
	if err := checkRange(bounds{first: st.first, last: st.last}, lo, hi); err != nil {
		return nil, err
	}
	if lo == hi {
		return nil, nil
	}
	out := make([]wire.Entry, 0, min(hi-lo, 1024))
	size := 0
	c := logB.Cursor()
	i := lo
	for k, v := c.Seek(indexKey(nil, lo)); i < hi; k, v = c.Next() {
		if k == nil || len(k) != 8 || binary.BigEndian.Uint64(k) != i {
			return nil, corruptf(s.path, "log entry %d is missing (found key %x)", i, k)
		}
		size += len(v) - 4
		if maxBytes > 0 && size > maxBytes && len(out) > 0 {
			break
		}
		e, err := s.decodeValue(i, k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		i++
	}
	return out, nil
}

// Get implements StableStore.
func (s *BoltStore) Get(key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	tx, err := s.readTx()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	k := []byte(key)
	v := tx.Bucket(bucketStable).Get(k)
	if v == nil {
		return nil, fmt.Errorf("storage: %s: stable key %q: %w", s.path, key, wire.ErrNotFound)
	}
	p, _, err := unframe(k, v)
	if err != nil {
		return nil, corruptf(s.path, "stable key %q: %v", key, err)
	}
	// Copy: v lives in the mmap only while tx is open.
	return append([]byte{}, p...), nil
}

// Keys implements StableStore.
func (s *BoltStore) Keys(prefix string) ([]string, error) {
	tx, err := s.readTx()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var keys []string
	p := []byte(prefix)
	c := tx.Bucket(bucketStable).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys, nil
}

// readTx begins a read transaction on an open store whose buckets exist.
func (s *BoltStore) readTx() (*bolt.Tx, error) {
	if _, err := s.bounds(); err != nil {
		return nil, err
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, s.errf(err, "begin")
	}
	if _, err := s.buckets(tx); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}
