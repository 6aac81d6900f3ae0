package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// The records of a WALStore segment. Every record is a frame:
//
//	u32 body length n (big-endian)
//	u32 CRC-32C of salt ‖ segment ‖ offset ‖ n ‖ body
//	body (n bytes)
//	zeros up to the next multiple of 8
//
// The CRC binds the record to the store (salt: 8 random bytes chosen when
// the store is created), the segment and the offset it was written at, so a
// record copied or left elsewhere (a stale segment, a value that happens to
// hold a frame) never verifies at the wrong place. The first record of a
// segment is its checkpoint, which carries the salt; the CRC of every frame
// uses it.
//
// A body starts with the format version (walVersion) and a kind:
//
//	checkpoint: salt[8] segment u64 size u64 first u64 last u64
//	            base-stamp stable-count (key value)...
//	batch:      flags(1) [reset-index u64 reset-stamp] [truncate-from u64]
//	            entry-count (entry-length entry crc32c)...
//	            set-count (key value)... delete-count key...
//	compact:    up-to u64 base-stamp
//
// Counts and lengths are uvarints; keys, values and stamps are a uvarint
// length and the bytes (a stamp in edict's encoding, empty for the zero
// stamp). An entry is wire's encoding followed by the CRC-32C of its index
// and bytes, so Entries can check one entry without its record.

const (
	walVersion byte = 1

	walCheckpoint byte = 1
	walBatch      byte = 2
	walCompact    byte = 3

	walFlagReset    byte = 1
	walFlagTruncate byte = 2

	walFrameHeader = 8
	walAlign       = 8
	walSaltSize    = 8
)

// walRecord is a decoded record body.
type walRecord struct {
	kind byte

	// checkpoint
	salt        [walSaltSize]byte
	segment     uint64
	size        int64
	first, last uint64
	base        edict.Stamp
	stable      map[string][]byte

	// batch
	reset        *wire.Position
	truncateFrom uint64
	entries      []walEntry
	set          map[string][]byte
	del          []string

	// compact
	upTo uint64
	// base (above) is the stamp of entry upTo
}

// walEntry is an entry of a batch record: where its bytes are in the body.
type walEntry struct {
	index    uint64
	off, len int // of wire's encoding within the body
	stamp    edict.Stamp
}

func walCRC(salt []byte, segment uint64, off int64, body []byte) uint32 {
	var hdr [28]byte
	copy(hdr[:8], salt)
	binary.BigEndian.PutUint64(hdr[8:], segment)
	binary.BigEndian.PutUint64(hdr[16:], uint64(off))
	binary.BigEndian.PutUint32(hdr[24:], uint32(len(body)))
	return crc32.Update(crc32.Checksum(hdr[:], castagnoli), castagnoli, body)
}

// entryCRC is the checksum stored after an entry's bytes.
func entryCRC(index uint64, enc []byte) uint32 {
	var k [8]byte
	return checksum(indexKey(k[:0], index), enc)
}

// walFrameSize is the size of the frame holding a body of n bytes.
func walFrameSize(n int) int64 {
	return int64(walFrameHeader + (n+walAlign-1)/walAlign*walAlign)
}

// sealFrame fills in the header of the frame in buf[start:] (its body
// follows the 8 header bytes) for the given place, and pads it.
func sealFrame(buf []byte, start int, salt []byte, segment uint64, off int64) []byte {
	body := buf[start+walFrameHeader:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], walCRC(salt, segment, off, body))
	for len(buf)%walAlign != 0 {
		buf = append(buf, 0)
	}
	return buf
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendStamp(dst []byte, s edict.Stamp) ([]byte, error) {
	enc, err := encodeBase(s)
	if err != nil {
		return dst, err
	}
	return appendBytes(dst, enc), nil
}

func appendStable(dst []byte, m map[string][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	// Sorted, so that equal states encode the same.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		dst = appendBytes(dst, []byte(k))
		dst = appendBytes(dst, m[k])
	}
	return dst
}

// appendCheckpoint appends the body of a checkpoint record.
func appendCheckpoint(dst []byte, salt []byte, segment uint64, size int64, b bounds, stable map[string][]byte) ([]byte, error) {
	dst = append(dst, walVersion, walCheckpoint)
	dst = append(dst, salt...)
	dst = binary.BigEndian.AppendUint64(dst, segment)
	dst = binary.BigEndian.AppendUint64(dst, uint64(size))
	dst = binary.BigEndian.AppendUint64(dst, b.first)
	dst = binary.BigEndian.AppendUint64(dst, b.last)
	dst, err := appendStamp(dst, b.base)
	if err != nil {
		return dst, fmt.Errorf("checkpoint base stamp: %w", err)
	}
	return appendStable(dst, stable), nil
}

// appendBatch appends the body of a batch record, and to offs the offset
// within the body and the length of each entry's encoding.
func appendBatch(dst []byte, b *wire.Batch, offs []int) ([]byte, []int, error) {
	dst = append(dst, walVersion, walBatch)
	var flags byte
	if b.Reset != nil {
		flags |= walFlagReset
	}
	if b.TruncateFrom != 0 {
		flags |= walFlagTruncate
	}
	dst = append(dst, flags)
	var err error
	if b.Reset != nil {
		dst = binary.BigEndian.AppendUint64(dst, b.Reset.Index)
		if dst, err = appendStamp(dst, b.Reset.Stamp); err != nil {
			return dst, offs, fmt.Errorf("%w: reset stamp: %v", ErrInvalid, err)
		}
	}
	if b.TruncateFrom != 0 {
		dst = binary.BigEndian.AppendUint64(dst, b.TruncateFrom)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Entries)))
	for i := range b.Entries {
		e := &b.Entries[i]
		// The length goes in front, so the entry is encoded after a
		// placeholder of the largest uvarint a length can need and then
		// moved back over the unused bytes.
		mark := len(dst)
		dst = append(dst, make([]byte, binary.MaxVarintLen32)...)
		start := len(dst)
		if dst, err = wire.AppendEntry(dst, e); err != nil {
			return dst, offs, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		n := len(dst) - start
		lenBytes := binary.AppendUvarint(nil, uint64(n))
		copy(dst[mark:], lenBytes)
		copy(dst[mark+len(lenBytes):], dst[start:])
		dst = dst[:mark+len(lenBytes)+n]
		offs = append(offs, mark+len(lenBytes), n)
		dst = binary.BigEndian.AppendUint32(dst, entryCRC(e.Index, dst[mark+len(lenBytes):]))
	}
	dst = appendStable(dst, b.Stable)
	dst = binary.AppendUvarint(dst, uint64(len(b.Delete)))
	for _, k := range b.Delete {
		dst = appendBytes(dst, []byte(k))
	}
	return dst, offs, nil
}

func appendCompact(dst []byte, upTo uint64, base edict.Stamp) ([]byte, error) {
	dst = append(dst, walVersion, walCompact)
	dst = binary.BigEndian.AppendUint64(dst, upTo)
	dst, err := appendStamp(dst, base)
	if err != nil {
		return dst, fmt.Errorf("compaction base stamp: %w", err)
	}
	return dst, nil
}

// walReader decodes a body; the first error sticks.
type walReader struct {
	b   []byte
	off int
	err error
}

func (r *walReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d of the record: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *walReader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("%s: record ends early", what)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *walReader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail("%s: record ends early", what)
		return 0
	}
	r.off += 8
	return binary.BigEndian.Uint64(r.b[r.off-8:])
}

func (r *walReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || n != uvarintLen(v) {
		r.fail("%s: bad uvarint", what)
		return 0
	}
	r.off += n
	return v
}

// count reads a count of items of at least min bytes each, bounded by
// what is left of the record.
func (r *walReader) count(what string, min int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.b)-r.off)/uint64(min) {
		r.fail("%s: %d items cannot fit in the %d bytes left", what, n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

// bytes returns the next length-prefixed bytes, aliasing the record.
func (r *walReader) bytes(what string, limit int) []byte {
	n := r.uvarint(what)
	switch {
	case r.err != nil:
		return nil
	case n > uint64(limit):
		r.fail("%s: %d bytes exceeds the limit of %d", what, n, limit)
		return nil
	case n > uint64(len(r.b)-r.off):
		r.fail("%s: %d bytes, record ends early", what, n)
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

func (r *walReader) stamp(what string) edict.Stamp {
	enc := r.bytes(what, len(r.b))
	if r.err != nil || len(enc) == 0 {
		return edict.Stamp{}
	}
	s, err := edict.DecodeStamp(enc)
	if err != nil {
		r.fail("%s: %v", what, err)
		return edict.Stamp{}
	}
	if s.IsZero() {
		r.fail("%s: the zero stamp is stored as no bytes", what)
	}
	return s
}

func (r *walReader) key(what string) string {
	k := r.bytes(what, MaxKeySize)
	if r.err == nil && len(k) == 0 {
		r.fail("%s: empty key", what)
	}
	return string(k)
}

func (r *walReader) stableMap(what string) map[string][]byte {
	n := r.count(what, 2)
	m := make(map[string][]byte, n)
	prev := ""
	for i := 0; i < n && r.err == nil; i++ {
		k := r.key(what + " key")
		v := r.bytes(what+" value", MaxValueSize)
		if r.err != nil {
			break
		}
		if i > 0 && k <= prev {
			r.fail("%s: key %q out of order", what, k)
			break
		}
		prev = k
		m[k] = slices.Clone(v)
	}
	return m
}

// decodeWALRecord decodes a record body. It refuses unknown versions,
// kinds and flags, anything out of bounds, and trailing bytes. Entries are
// checked against their CRC and decoded (for their index and stamp).
func decodeWALRecord(body []byte) (walRecord, error) {
	r := &walReader{b: body}
	var rec walRecord
	if v := r.byte1("version"); r.err == nil && v != walVersion {
		r.fail("unknown version %d (want %d)", v, walVersion)
	}
	rec.kind = r.byte1("kind")
	switch rec.kind {
	case walCheckpoint:
		if len(r.b)-r.off < walSaltSize {
			r.fail("salt: record ends early")
			break
		}
		copy(rec.salt[:], r.b[r.off:])
		r.off += walSaltSize
		rec.segment = r.u64("segment")
		size := r.u64("size")
		if r.err == nil && (size > 1<<50 || size < walFrameHeader) {
			r.fail("implausible segment size %d", size)
		}
		rec.size = int64(size)
		rec.first = r.u64("first index")
		rec.last = r.u64("last index")
		if r.err == nil && (rec.first == 0 || rec.first > rec.last+1) {
			r.fail("bounds first %d, last %d", rec.first, rec.last)
		}
		rec.base = r.stamp("base stamp")
		rec.stable = r.stableMap("stable")
	case walBatch:
		flags := r.byte1("flags")
		if r.err == nil && flags&^(walFlagReset|walFlagTruncate) != 0 {
			r.fail("unknown flags %#x", flags)
		}
		if flags&walFlagReset != 0 {
			p := &wire.Position{Index: r.u64("reset index")}
			p.Stamp = r.stamp("reset stamp")
			rec.reset = p
		}
		if flags&walFlagTruncate != 0 {
			if rec.truncateFrom = r.u64("truncate from"); r.err == nil && rec.truncateFrom == 0 {
				r.fail("truncation from index 0")
			}
		}
		n := r.count("entries", 6)
		if n > 0 && r.err == nil {
			rec.entries = make([]walEntry, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			enc := r.bytes("entry", len(r.b))
			off := r.off - len(enc)
			if r.err != nil {
				break
			}
			if len(r.b)-r.off < 4 {
				r.fail("entry %d: checksum: record ends early", i)
				break
			}
			stored := binary.BigEndian.Uint32(r.b[r.off:])
			r.off += 4
			e, err := wire.DecodeEntry(enc)
			if err != nil {
				r.fail("entry %d: %v", i, err)
				break
			}
			if c := entryCRC(e.Index, enc); c != stored {
				r.fail("entry %d (index %d): checksum mismatch (stored %08x, computed %08x)", i, e.Index, stored, c)
				break
			}
			rec.entries = append(rec.entries, walEntry{index: e.Index, off: off, len: len(enc), stamp: e.Stamp})
		}
		rec.set = r.stableMap("stable set")
		nd := r.count("stable deletes", 2)
		for i := 0; i < nd && r.err == nil; i++ {
			rec.del = append(rec.del, r.key("stable delete"))
		}
	case walCompact:
		rec.upTo = r.u64("compact up to")
		rec.base = r.stamp("base stamp")
	default:
		if r.err == nil {
			r.fail("unknown record kind %d", rec.kind)
		}
	}
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return rec, r.err
}

// uvarintLen is the length of v's shortest uvarint, the only one the
// decoder accepts, so that a record has one encoding.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}
