package wire

import (
	"fmt"
	"math"

	"github.com/edictlog/edictlog/edict"
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
// ({c, e, q: [{p, t: {i, n}}]}). It is written and read by hand because it
// is on the hot path of every append and read: the reflective codec works
// field by field through reflection, and with the bounded MaxInitLen that
// hostile input requires it reads a large Data in 64-byte growth steps,
// copying it over and over. The hand-written decoder checks each length
// against the input left before it allocates, which bounds memory just as
// well. Tests check byte for byte that the codec agrees.

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
	dst = append(dst, EntryVersion, 0x85)
	dst = append(dst, 0xa1, 'd')
	dst = appendBin(dst, e.Data)
	dst = append(dst, 0xa1, 'i')
	dst = appendUint(dst, e.Index)
	dst = append(dst, 0xa1, 'k')
	dst = appendUint(dst, uint64(e.Kind))
	dst = append(dst, 0xa1, 'r')
	dst = appendStamp(dst, &e.Reign)
	dst = append(dst, 0xa1, 's')
	dst = appendStamp(dst, &e.Stamp)
	if n := len(dst) - start; n > MaxEntrySize {
		return dst[:start], fmt.Errorf("%w: entry %d encodes to %d bytes, over the limit of %d", ErrInvalid, e.Index, n, MaxEntrySize)
	}
	return dst, nil
}

func appendStamp(dst []byte, s *edict.Stamp) []byte {
	dst = append(dst, 0x83, 0xa1, 'c')
	dst = appendUint(dst, s.Counter)
	dst = append(dst, 0xa1, 'e')
	dst = appendUint(dst, s.Epoch)
	dst = append(dst, 0xa1, 'q')
	if len(s.QT) == 0 {
		return append(dst, 0xc0)
	}
	dst = appendArrayLen(dst, len(s.QT))
	for _, r := range s.QT {
		dst = append(dst, 0x82, 0xa1, 'p')
		dst = appendUint(dst, uint64(r.Process))
		dst = append(dst, 0xa1, 't', 0x82, 0xa1, 'i')
		dst = appendUint(dst, r.T.Incarnation)
		dst = append(dst, 0xa1, 'n')
		dst = appendInt(dst, r.T.Nanos)
	}
	return dst
}

// appendUint writes the shortest msgpack unsigned form, as the codec does.
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(dst, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(dst, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, 0xcf, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendInt writes a signed integer the way the codec does (signed forms for
// values above 127, fixints for [-32, 127]).
func appendInt(dst []byte, v int64) []byte {
	switch {
	case v > math.MaxInt8:
		switch {
		case v <= math.MaxInt16:
			return append(dst, 0xd1, byte(v>>8), byte(v))
		case v <= math.MaxInt32:
			return append(dst, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		}
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(dst, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(dst, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	u := uint64(v)
	return append(dst, 0xd3, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return append(dst, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// appendBin writes b as msgpack bin, or nil when it is empty: one canonical
// form, so that encode(decode(x)) == x for every x encode produced.
func appendBin(dst, b []byte) []byte {
	n := len(b)
	switch {
	case n == 0:
		return append(dst, 0xc0)
	case n <= math.MaxUint8:
		dst = append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xc5, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
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
	r := mpReader{b: b, off: 1}
	r.entry(&e)
	if r.err == nil && r.off != len(b) {
		r.fail("%d trailing bytes", len(b)-r.off)
	}
	if r.err == nil && !e.Kind.Valid() {
		r.fail("unknown kind %d", uint8(e.Kind))
	}
	if r.err == nil {
		if err := checkStamp(e.Reign); err != nil {
			r.fail("reign: %v", err)
		} else if err := checkStamp(e.Stamp); err != nil {
			r.fail("stamp: %v", err)
		}
	}
	if r.err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", r.err)
	}
	return e, nil
}
