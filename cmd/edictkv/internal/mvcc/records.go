package mvcc

import (
	"bytes"
	"errors"
	"fmt"
)

// Records are the application's own small values kept beside the store's
// history, outside it: in the meta bucket under keys that begin with
// recordPrefix, which no key of the store's own begins with. A write
// transaction changes them (PutRecord, DeleteRecord) atomically with its
// changes and its log index, without making a revision; snapshots and
// restores carry them, and compaction leaves them alone. The replicated
// state keeps its system namespace (member directory, alarms) and the
// stamps of revisions there.
var recordPrefix = []byte("record/")

// ErrRecordKey refuses an empty record key.
var ErrRecordKey = errors.New("mvcc: empty record key")

func recordKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(recordPrefix)+len(key)), recordPrefix...), key...)
}

// PutRecord sets the application record key to value with the
// transaction. It is not a change of the history: it does not move the
// revision.
func (tw *TxnWrite) PutRecord(key, value []byte) error {
	switch {
	case tw.ended:
		return fmt.Errorf("mvcc: record put on an ended write")
	case len(key) == 0:
		return ErrRecordKey
	}
	// The record's key and a copy of its value share one allocation.
	n := len(recordPrefix) + len(key)
	buf := make([]byte, n+len(value))
	copy(buf, recordPrefix)
	copy(buf[len(recordPrefix):], key)
	var v []byte
	if value != nil {
		v = buf[n:]
		copy(v, value)
	}
	tw.s.bufMu.Lock()
	tw.s.open.put(bucketMeta, buf[:n:n], v)
	tw.s.bufMu.Unlock()
	return nil
}

// DeleteRecord removes the application record key with the transaction
// (a no-op if there is none).
func (tw *TxnWrite) DeleteRecord(key []byte) error {
	switch {
	case tw.ended:
		return fmt.Errorf("mvcc: record delete on an ended write")
	case len(key) == 0:
		return ErrRecordKey
	}
	tw.s.bufMu.Lock()
	tw.s.open.del(bucketMeta, recordKey(key))
	tw.s.bufMu.Unlock()
	return nil
}

// RecordView reads the application records as the store holds them:
// what every write transaction ended so far left, and what the one in
// progress wrote so far, if any. It is for one goroutine; release it.
type RecordView struct {
	v *view
}

// ReadRecords opens a RecordView.
func (s *Store) ReadRecords() (*RecordView, error) {
	v, err := s.newView()
	if err != nil {
		return nil, fmt.Errorf("mvcc: records: %w", err)
	}
	return &RecordView{v: v}, nil
}

// Get returns the record key, nil if there is none. The slice is valid
// until Release.
func (rv *RecordView) Get(key []byte) []byte {
	return rv.v.get(bucketMeta, recordKey(key))
}

// Ascend calls fn on each record whose key is in [from, to) (to nil: no
// bound), in key order, until fn returns false. The slices are valid until
// Release.
func (rv *RecordView) Ascend(from, to []byte, fn func(key, value []byte) bool) {
	end := recordKey(to)
	if to == nil {
		// Every key with the prefix sorts before the prefix with its last
		// byte raised.
		end = bytes.Clone(recordPrefix)
		end[len(end)-1]++
	}
	rv.v.ascend(bucketMeta, recordKey(from), end, func(k, val []byte) bool {
		return fn(k[len(recordPrefix):], val)
	})
}

// Release ends the view. It is safe to call more than once.
func (rv *RecordView) Release() { rv.v.release() }
