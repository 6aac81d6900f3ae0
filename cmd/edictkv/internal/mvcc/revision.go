package mvcc

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Revision is a point in the store's history: Main is the revision of a
// write transaction, Sub the position of one change within it (0, 1, …).
type Revision struct {
	Main int64
	Sub  int64
}

// GreaterThan reports whether a comes after b.
func (a Revision) GreaterThan(b Revision) bool {
	if a.Main != b.Main {
		return a.Main > b.Main
	}
	return a.Sub > b.Sub
}

// The key bucket's keys are etcd's: the main revision in 8 big-endian bytes,
// '_', the sub revision in 8 big-endian bytes, and a trailing 't' when the
// change is a deletion (a tombstone). Byte order is revision order.
const (
	revKeyLen       = 8 + 1 + 8
	markedRevKeyLen = revKeyLen + 1
	markTombstone   = 't'
)

// appendRevKey appends the key bucket key of rev to dst.
func appendRevKey(dst []byte, rev Revision, tombstone bool) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(rev.Main))
	dst = append(dst, '_')
	dst = binary.BigEndian.AppendUint64(dst, uint64(rev.Sub))
	if tombstone {
		dst = append(dst, markTombstone)
	}
	return dst
}

func revKey(rev Revision, tombstone bool) []byte {
	return appendRevKey(make([]byte, 0, markedRevKeyLen), rev, tombstone)
}

// decodeRevKey decodes a key bucket key.
func decodeRevKey(k []byte) (rev Revision, tombstone bool, err error) {
	switch {
	case len(k) == markedRevKeyLen:
		if k[revKeyLen] != markTombstone {
			return Revision{}, false, fmt.Errorf("revision key %x: unknown mark %q", k, k[revKeyLen])
		}
		tombstone = true
	case len(k) != revKeyLen:
		return Revision{}, false, fmt.Errorf("revision key %x: %d bytes, want %d or %d", k, len(k), revKeyLen, markedRevKeyLen)
	}
	if k[8] != '_' {
		return Revision{}, false, fmt.Errorf("revision key %x: separator %q, want '_'", k, k[8])
	}
	rev.Main = int64(binary.BigEndian.Uint64(k))
	rev.Sub = int64(binary.BigEndian.Uint64(k[9:]))
	if rev.Main < 1 || rev.Sub < 0 {
		return Revision{}, false, fmt.Errorf("revision key %x: revision %d.%d out of range", k, rev.Main, rev.Sub)
	}
	return rev, tombstone, nil
}

// decodeValue decodes the key bucket value stored under rev, and checks that
// it is one the store could have written there: a tombstone holds the key
// alone; a put holds mod_revision rev.Main, a create_revision no later and
// a version from 1.
func decodeValue(rev Revision, tombstone bool, v []byte) (*mvccpb.KeyValue, error) {
	kv := new(mvccpb.KeyValue)
	if err := kv.Unmarshal(v); err != nil {
		return nil, fmt.Errorf("value at revision %d.%d: %w", rev.Main, rev.Sub, err)
	}
	if len(kv.Key) == 0 {
		return nil, fmt.Errorf("value at revision %d.%d: empty key", rev.Main, rev.Sub)
	}
	if tombstone {
		if kv.CreateRevision != 0 || kv.ModRevision != 0 || kv.Version != 0 || len(kv.Value) != 0 || kv.Lease != 0 {
			return nil, fmt.Errorf("tombstone of key %q at revision %d.%d: holds more than the key", kv.Key, rev.Main, rev.Sub)
		}
		return kv, nil
	}
	if kv.ModRevision != rev.Main || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision || kv.Version < 1 {
		return nil, fmt.Errorf("key %q at revision %d.%d: create_revision %d, mod_revision %d, version %d do not fit",
			kv.Key, rev.Main, rev.Sub, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return kv, nil
}

// Meta bucket entries. The compaction marks are etcd's: a revision key
// (17 bytes) of the main revision. The consistent index is 8 big-endian
// bytes, as etcd's.
var (
	metaConsistentIndex  = []byte("consistent_index")
	metaScheduledCompact = []byte("scheduledCompactRev")
	metaFinishedCompact  = []byte("finishedCompactRev")
	metaFormat           = []byte("edictkv_format")
)

// formatVersion is metaFormat's value: it tells a store's file from any
// other bbolt file, and lets a later format refuse an older one clearly.
const formatVersion = "edictkv-mvcc/1"

func encodeCompactRev(rev int64) []byte { return revKey(Revision{Main: rev}, false) }

func decodeCompactRev(name, v []byte) (int64, error) {
	if len(v) != revKeyLen || v[8] != '_' {
		return 0, fmt.Errorf("meta %s: %x is not a revision", name, v)
	}
	rev := int64(binary.BigEndian.Uint64(v))
	if rev < 0 || binary.BigEndian.Uint64(v[9:]) != 0 {
		return 0, fmt.Errorf("meta %s: %x is not a revision", name, v)
	}
	return rev, nil
}

func encodeUint64(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }

func decodeUint64(what string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%s: %d bytes, want 8", what, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// The revision bucket maps a main revision (8 big-endian bytes) to the log
// index of the entry that made it (8 big-endian bytes).
func revIndexKey(main int64) []byte { return encodeUint64(uint64(main)) }

// revIndexRecord is the revision bucket's entry of main, made by the entry
// at index, in one allocation.
func revIndexRecord(main int64, index uint64) (key, value []byte) {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(main))
	binary.BigEndian.PutUint64(b[8:], index)
	return b[:8:8], b[8:]
}

func decodeRevIndexKey(k []byte) (int64, error) {
	x, err := decodeUint64("revision bucket key", k)
	if err != nil {
		return 0, err
	}
	if x < 2 || x > 1<<62 {
		return 0, fmt.Errorf("revision bucket key %x: revision %d out of range", k, x)
	}
	return int64(x), nil
}
