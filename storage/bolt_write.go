package storage

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/wire"
	bolt "go.etcd.io/bbolt"
)

// StoreBatch implements LogStore: one write transaction, one durable commit.
func (s *BoltStore) StoreBatch(b wire.Batch) error {
	if b.Empty() {
		_, err := s.bounds()
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	next, err := plan(s.b, &b)
	if err != nil {
		return err
	}
	st := s.state
	if b.Reset != nil {
		if st.baseEnc, err = encodeBase(b.Reset.Stamp); err != nil {
			return fmt.Errorf("%w: reset stamp: %v", ErrInvalid, err)
		}
		st.logDigest = 0
	}
	// Encode outside the transaction, into buffers reused across batches:
	// bbolt keeps the key and value slices until the commit, so they are
	// sliced only once everything is encoded.
	s.keys, s.buf = s.keys[:0], s.buf[:0]
	ends := make([]int, len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		s.keys = indexKey(s.keys, e.Index)
		start := len(s.buf)
		if s.buf, err = wire.AppendEntry(s.buf, e); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		c := checksum(s.keys[8*i:8*i+8], s.buf[start:])
		s.buf = binary.BigEndian.AppendUint32(s.buf, c)
		st.logDigest ^= c
		ends[i] = len(s.buf)
	}
	defer s.trimBuffers()

	tx, err := s.db.Begin(true)
	if err != nil {
		return s.errf(err, "begin")
	}
	defer tx.Rollback()
	logB, err := s.buckets(tx)
	if err != nil {
		return err
	}
	if b.Reset != nil {
		if err := tx.DeleteBucket(bucketLog); err != nil {
			return s.errf(err, "reset log")
		}
		if logB, err = tx.CreateBucket(bucketLog); err != nil {
			return s.errf(err, "reset log")
		}
	}
	logB.FillPercent = s.opts.FillPercent
	if b.TruncateFrom != 0 {
		if err := s.truncate(logB, b.TruncateFrom, s.b.last, &st); err != nil {
			return err
		}
		if len(b.Entries) == 0 && next.last >= next.first {
			e, err := s.readEntry(logB, next.last)
			if err != nil {
				return err
			}
			next.lastStamp = e.Stamp
		}
	}
	start := 0
	for i, end := range ends {
		if err := logB.Put(s.keys[8*i:8*i+8], s.buf[start:end]); err != nil {
			return s.errf(err, "put entry %d", b.Entries[i].Index)
		}
		start = end
	}
	if err := s.applyStable(tx, b.Stable, b.Delete, &st); err != nil {
		return err
	}
	st.first, st.last = next.first, next.last
	if err := s.commit(tx, &st); err != nil {
		return err
	}
	s.setBounds(next)
	return nil
}

// trimBuffers drops buffers a huge batch grew, so one such batch does not
// pin its memory for the life of the store.
func (s *BoltStore) trimBuffers() {
	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}
	if cap(s.keys) > 64<<10 {
		s.keys = nil
	}
}

func (s *BoltStore) buckets(tx *bolt.Tx) (*bolt.Bucket, error) {
	for _, name := range [][]byte{bucketLog, bucketStable, bucketMeta} {
		if tx.Bucket(name) == nil {
			return nil, corruptf(s.path, "bucket %q is missing", name)
		}
	}
	return tx.Bucket(bucketLog), nil
}

// truncate removes the entries from..last, updating the digest.
func (s *BoltStore) truncate(logB *bolt.Bucket, from, last uint64, st *boltState) error {
	c := logB.Cursor()
	var key [8]byte
	for i := from; i <= last; i++ {
		k, v := c.Seek(indexKey(key[:0], i))
		if k == nil || binary.BigEndian.Uint64(k) != i {
			return corruptf(s.path, "log entry %d is missing", i)
		}
		st.logDigest ^= trailer(v)
		// Cursor.Delete followed by Next can skip an element in bbolt,
		// so every step seeks afresh.
		if err := c.Delete(); err != nil {
			return s.errf(err, "truncate entry %d", i)
		}
	}
	return nil
}

// applyStable sets and deletes stable keys, updating the digest.
func (s *BoltStore) applyStable(tx *bolt.Tx, set map[string][]byte, del []string, st *boltState) error {
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	sb := tx.Bucket(bucketStable)
	for k, v := range set {
		key := []byte(k)
		if old := sb.Get(key); old != nil {
			st.stableDigest ^= trailer(old)
		}
		framed := frame(nil, key, v)
		st.stableDigest ^= trailer(framed)
		if err := sb.Put(key, framed); err != nil {
			return s.errf(err, "set stable key %q", k)
		}
	}
	for _, k := range del {
		key := []byte(k)
		if old := sb.Get(key); old != nil {
			st.stableDigest ^= trailer(old)
			if err := sb.Delete(key); err != nil {
				return s.errf(err, "delete stable key %q", k)
			}
		}
	}
	return nil
}

// commit writes the state record and commits tx durably: bbolt writes the
// dirty pages and the meta page (the store opens bbolt with NoSync), then
// one fdatasync makes them all durable. Nothing is acknowledged before that
// sync returns; a crash before it leaves either the previous transaction or,
// if the meta page got ahead of its pages, a torn one that Open detects and
// rolls back (bolt_rollback.go). A read transaction that begins between
// bbolt's commit and the sync sees the new pages before they are durable;
// the bounds that Entries and the log's readers go by move only after the
// sync, so only a Get racing the Set of the same key can see such a value.
// It records how long writing and syncing took.
func (s *BoltStore) commit(tx *bolt.Tx, st *boltState) error {
	st.txid = uint64(tx.ID())
	if err := tx.Bucket(bucketMeta).Put(keyState, st.encode(nil)); err != nil {
		return s.errf(err, "write state")
	}
	err := tx.Commit()
	stats := tx.Stats()
	syncStart := time.Now()
	if err == nil {
		err = s.db.Sync()
	}
	if err != nil {
		// A failed write or fsync leaves the file's contents unknown (the
		// kernel may have dropped the dirty pages); refuse further writes
		// rather than build on it. Reopening re-verifies the file.
		s.failed = s.errf(err, "commit failed, store refuses further writes until reopened")
		return s.failed
	}
	d := int64(stats.GetWriteTime() + time.Since(syncStart))
	s.fsyncs.Add(1)
	s.fsyncTime.Add(d)
	s.pageWrites.Add(uint64(stats.GetWrite()))
	if d > s.fsyncMax.Load() {
		s.fsyncMax.Store(d) // only writers store, under wmu
	}
	s.state = *st
	s.prealloc()
	return nil
}

// writable reports why the store cannot take a write; the caller holds wmu.
func (s *BoltStore) writable() error {
	if _, err := s.bounds(); err != nil {
		return err
	}
	return s.failed
}

func (s *BoltStore) setBounds(b bounds) {
	s.mu.Lock()
	s.b = b
	s.mu.Unlock()
}

// CompactPrefix implements LogStore. Each step is its own transaction of at
// most CompactChunk entries and releases the write lock before the next, so
// an append waits for at most one step.
func (s *BoltStore) CompactPrefix(upTo uint64) error {
	for {
		done, err := s.compactStep(upTo)
		if err != nil || done {
			return err
		}
	}
}

func (s *BoltStore) compactStep(upTo uint64) (done bool, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return true, err
	}
	cur := s.b
	if err := checkCompact(cur, upTo); err != nil {
		return true, err
	}
	if upTo < cur.first {
		return true, nil
	}
	end := min(upTo, cur.first+uint64(s.opts.CompactChunk)-1)
	tx, err := s.db.Begin(true)
	if err != nil {
		return true, s.errf(err, "begin")
	}
	defer tx.Rollback()
	logB, err := s.buckets(tx)
	if err != nil {
		return true, err
	}
	e, err := s.readEntry(logB, end)
	if err != nil {
		return true, err
	}
	st := s.state
	if st.baseEnc, err = encodeBase(e.Stamp); err != nil {
		return true, s.errf(err, "compact: stamp of entry %d", end)
	}
	if err := s.truncate(logB, cur.first, end, &st); err != nil {
		return true, err
	}
	st.first = end + 1
	if err := s.commit(tx, &st); err != nil {
		return true, err
	}
	next := cur
	next.first, next.base = end+1, e.Stamp
	s.setBounds(next)
	return end == upTo, nil
}

// Set implements StableStore.
func (s *BoltStore) Set(key string, value []byte) error {
	return s.StoreBatch(wire.Batch{Stable: map[string][]byte{key: value}})
}

// Delete implements StableStore.
func (s *BoltStore) Delete(key string) error {
	return s.StoreBatch(wire.Batch{Delete: []string{key}})
}

// BumpIncarnation implements StableStore.
func (s *BoltStore) BumpIncarnation() (uint64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return 0, err
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return 0, s.errf(err, "begin")
	}
	defer tx.Rollback()
	if _, err := s.buckets(tx); err != nil {
		return 0, err
	}
	key := []byte(wire.KeyIncarnation)
	var cur uint64
	if v := tx.Bucket(bucketStable).Get(key); v != nil {
		p, _, err := unframe(key, v)
		if err != nil {
			return 0, corruptf(s.path, "stable key %q: %v", wire.KeyIncarnation, err)
		}
		if cur, err = wire.DecodeUint64(wire.KeyIncarnation, p); err != nil {
			return 0, fmt.Errorf("storage: %s: %w", s.path, err)
		}
	}
	if cur+1 == 0 {
		return 0, fmt.Errorf("storage: %s: incarnation overflow", s.path)
	}
	st := s.state
	if err := s.applyStable(tx, map[string][]byte{wire.KeyIncarnation: wire.EncodeUint64(cur + 1)}, nil, &st); err != nil {
		return 0, err
	}
	if err := s.commit(tx, &st); err != nil {
		return 0, err
	}
	return cur + 1, nil
}
