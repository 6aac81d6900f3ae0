package wire

import (
	"fmt"
	"math"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/mpack"
)

// EntryVersion is the first byte of every encoded entry. A decoder refuses
// any other value instead of guessing at the layout.
const EntryVersion byte = 1

// MaxEntrySize bounds an encoded entry (version byte included). It keeps a
// damaged length field from costing memory and is far above any command a
// replicated log should carry.
const MaxEntrySize = 16 << 20

// The encoding is the version byte followed by one msgpack map, the same
// bytes github.com/hashicorp/go-msgpack/v2/codec writes for
//
//	struct { d []byte; i uint64; k uint8; r Stamp; s Stamp }
//
// (data, index, kind, reign, stamp) with Stamp as edict encodes it
// (edict.AppendStampMsgpack: {c, e, q: [{p, t: {i, n}}]}), except that
// empty data and an empty QT are always nil, one form each. It is written
// and read by hand (mpack) because it is on the hot path of
// every append and read: the reflective codec works field by field
// through reflection, and with the bounded MaxInitLen that hostile input
// requires it reads a large Data in 64-byte growth steps, copying it over
// and over. The hand-written decoder checks each length against the input
// left before it allocates, which bounds memory just as well. It reads
// structs in mpack.Exact mode: every field, each once, in any order.
// Tests check byte for byte that the codec agrees.

// EncodeEntry returns the encoding of e. It refuses an entry the decoder would
// refuse (unknown kind, malformed stamp, too large).
func EncodeEntry(e Entry) ([]byte, error) {
	return AppendEntry(nil, &e)
}

// AppendEntry appends the encoding of e to dst, so a batch can be encoded
// into one reused buffer.
func AppendEntry(dst []byte, e *Entry) ([]byte, error) {
	if err := e.Check(); err != nil {
		return dst, err
	}
	start := len(dst)
	// Fields in the order of their names, which is the order the codec
	// writes them in.
	dst = append(dst, EntryVersion)
	dst = mpack.AppendMapLen(dst, 5)
	dst = mpack.AppendStr(dst, "d")
	dst = appendData(dst, e.Data)
	dst = mpack.AppendStr(dst, "i")
	dst = mpack.AppendUint(dst, e.Index)
	dst = mpack.AppendStr(dst, "k")
	dst = mpack.AppendUint(dst, uint64(e.Kind))
	dst = mpack.AppendStr(dst, "r")
	dst = appendEntryStamp(dst, &e.Reign)
	dst = mpack.AppendStr(dst, "s")
	dst = appendEntryStamp(dst, &e.Stamp)
	if n := len(dst) - start; n > MaxEntrySize {
		return dst[:start], fmt.Errorf("%w: entry %d encodes to %d bytes, over the limit of %d", ErrInvalid, e.Index, n, MaxEntrySize)
	}
	return dst, nil
}

// appendEntryStamp writes an entry's stamp with one form for "no QT": nil,
// which the decoder reads an empty array as too.
func appendEntryStamp(dst []byte, s *edict.Stamp) []byte {
	if s.QT != nil && len(s.QT) == 0 {
		c := *s
		c.QT = nil
		s = &c
	}
	return edict.AppendStampMsgpack(dst, s)
}

// appendData writes entry data as a bin, or nil when it is empty: one
// canonical form, so that encode(decode(x)) == x for every x encode
// produced.
func appendData(dst, b []byte) []byte {
	if len(b) == 0 {
		return mpack.AppendNil(dst)
	}
	return mpack.AppendBin(dst, b)
}

// DecodeEntry decodes an entry written by EncodeEntry (or by the msgpack
// codec from the same struct). It checks the version byte and the size,
// refuses unknown or repeated fields, missing fields, unknown kinds,
// malformed stamps and trailing bytes, and never panics. Data is copied: the
// result does not alias b.
func DecodeEntry(b []byte) (Entry, error) {
	var e Entry
	switch {
	case len(b) == 0:
		return e, fmt.Errorf("decode entry: empty input")
	case len(b) > MaxEntrySize:
		return e, fmt.Errorf("decode entry: %d bytes exceeds the limit of %d", len(b), MaxEntrySize)
	case b[0] != EntryVersion:
		return e, fmt.Errorf("decode entry: unknown version byte %d (want %d)", b[0], EntryVersion)
	}
	r := mpack.NewReader(b, 1, mpack.Exact)
	r.Fields("entry", entryFields, func(name string) {
		switch name {
		case "d":
			e.Data = r.Bytes("data")
		case "i":
			e.Index = r.Uint("index")
		case "k":
			k := r.Uint("kind")
			if k > math.MaxUint8 {
				r.Fail("kind %d out of range", k)
			}
			e.Kind = EntryKind(k)
		case "r":
			e.Reign = readEntryStamp(&r, "reign")
		case "s":
			e.Stamp = readEntryStamp(&r, "stamp")
		}
	})
	r.End()
	if r.Err() == nil && !e.Kind.Valid() {
		r.Fail("unknown kind %d", uint8(e.Kind))
	}
	if r.Err() == nil {
		if err := checkStamp(e.Reign); err != nil {
			r.Fail("reign: %v", err)
		} else if err := checkStamp(e.Stamp); err != nil {
			r.Fail("stamp: %v", err)
		}
	}
	if err := r.Err(); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	return e, nil
}

var entryFields = []string{"d", "i", "k", "r", "s"}

func readEntryStamp(r *mpack.Reader, what string) edict.Stamp {
	s := edict.ReadStampMsgpack(r, what)
	if len(s.QT) == 0 {
		s.QT = nil // one form for "no QT", as the encoder writes it
	}
	return s
}
