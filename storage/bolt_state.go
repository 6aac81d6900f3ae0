package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/edictlog/edictlog/edict"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the CRC-32C of key ‖ v. Covering the key makes a value that
// turns up under another key (a damaged key or pointer) fail its check.
func checksum(key, v []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, v)
}

// frame appends v ‖ checksum(key, v) to dst.
func frame(dst, key, v []byte) []byte {
	c := checksum(key, v)
	dst = append(dst, v...)
	return binary.BigEndian.AppendUint32(dst, c)
}

// trailer returns the checksum stored at the end of a framed value.
func trailer(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v[len(v)-4:])
}

// unframe checks a framed value and returns its payload (aliasing v) and
// checksum.
func unframe(key, v []byte) ([]byte, uint32, error) {
	if len(v) < 4 {
		return nil, 0, fmt.Errorf("value of %d bytes is shorter than its checksum", len(v))
	}
	p := v[:len(v)-4]
	stored, computed := trailer(v), checksum(key, p)
	if stored != computed {
		return nil, 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", stored, computed)
	}
	return p, stored, nil
}

// boltState is the "state" record of the meta bucket, rewritten by every
// transaction that changes the log or the stable bucket.
type boltState struct {
	// txid is the bbolt transaction that wrote the record. A commit
	// writes its pages and its meta page under one fdatasync, so after a
	// crash the meta page may be on disk while some of the pages it points
	// to are not (bolt_rollback.go); a record whose txid is not the meta
	// page's is such a leftover. 0 in records of version 1, written when
	// every commit synced twice and the meta could not get ahead.
	txid         uint64
	first, last  uint64
	logDigest    uint32 // XOR of the checksums of all log values
	stableDigest uint32 // XOR of the checksums of all stable values
	baseEnc      []byte // edict encoding of the stamp of entry first-1; empty for the zero stamp
}

// stateVersion 2 adds txid after the version byte; version 1 is still read.
const (
	stateVersion   byte = 2
	stateVersionV1 byte = 1
)

func (st *boltState) encode(dst []byte) []byte {
	p := make([]byte, 0, 33+len(st.baseEnc))
	p = append(p, stateVersion)
	p = binary.BigEndian.AppendUint64(p, st.txid)
	p = binary.BigEndian.AppendUint64(p, st.first)
	p = binary.BigEndian.AppendUint64(p, st.last)
	p = binary.BigEndian.AppendUint32(p, st.logDigest)
	p = binary.BigEndian.AppendUint32(p, st.stableDigest)
	p = append(p, st.baseEnc...)
	return frame(dst, keyState, p)
}

func decodeState(v []byte) (boltState, error) {
	p, _, err := unframe(keyState, v)
	if err != nil {
		return boltState{}, err
	}
	if len(p) == 0 {
		return boltState{}, fmt.Errorf("empty record")
	}
	var st boltState
	switch p[0] {
	case stateVersion:
		if len(p) < 33 {
			return boltState{}, fmt.Errorf("%d bytes, want at least 33", len(p))
		}
		st.txid = binary.BigEndian.Uint64(p[1:])
		if st.txid == 0 {
			return boltState{}, fmt.Errorf("transaction id 0 is impossible")
		}
		p = p[8:] // the rest is laid out as in version 1
	case stateVersionV1:
		if len(p) < 25 {
			return boltState{}, fmt.Errorf("%d bytes, want at least 25", len(p))
		}
	default:
		return boltState{}, fmt.Errorf("unknown version byte %d (want %d or %d)", p[0], stateVersionV1, stateVersion)
	}
	st = boltState{
		txid:         st.txid,
		first:        binary.BigEndian.Uint64(p[1:]),
		last:         binary.BigEndian.Uint64(p[9:]),
		logDigest:    binary.BigEndian.Uint32(p[17:]),
		stableDigest: binary.BigEndian.Uint32(p[21:]),
		baseEnc:      append([]byte(nil), p[25:]...),
	}
	if st.first == 0 || st.last+1 < st.first {
		return boltState{}, fmt.Errorf("bounds first %d, last %d are impossible", st.first, st.last)
	}
	if _, err := st.base(); err != nil {
		return boltState{}, err
	}
	return st, nil
}

func (st *boltState) base() (edict.Stamp, error) {
	if len(st.baseEnc) == 0 {
		return edict.Stamp{}, nil
	}
	s, err := edict.DecodeStamp(st.baseEnc)
	if err != nil {
		return s, fmt.Errorf("base stamp: %v", err)
	}
	return s, nil
}

func encodeBase(s edict.Stamp) ([]byte, error) {
	if s.IsZero() {
		return nil, nil
	}
	return edict.EncodeStamp(s)
}

// indexKey appends the key of index i to dst.
func indexKey(dst []byte, i uint64) []byte { return binary.BigEndian.AppendUint64(dst, i) }
