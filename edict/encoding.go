package edict

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// WireVersion is the first byte of every encoded Time, QT and Stamp. A
// decoder refuses any other version instead of guessing at the layout.
const WireVersion byte = 1

// MaxQTSize bounds the readings in a decoded QT: no quorum of a practical
// epoch comes near it, and it keeps a hostile input from costing memory.
const MaxQTSize = 255

// MaxEncodedSize bounds the input the decoders accept.
const MaxEncodedSize = 16 << 10

func msgpackHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}

var mh = msgpackHandle()

// encode writes the version byte and the msgpack form of v.
func encode(v any) ([]byte, error) {
	// NewEncoderBytes writes from the start of the slice it is given, so
	// the version byte goes in front afterwards.
	var body []byte
	if err := codec.NewEncoderBytes(&body, mh).Encode(v); err != nil {
		return nil, fmt.Errorf("edict: encode %T: %w", v, err)
	}
	return append([]byte{WireVersion}, body...), nil
}

// decode checks the version byte and size, decodes exactly one msgpack value
// into v and refuses trailing bytes.
func decode(what string, b []byte, v any) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("edict: decode %s: empty input", what)
	case len(b) > MaxEncodedSize:
		return fmt.Errorf("edict: decode %s: %d bytes exceeds the limit of %d", what, len(b), MaxEncodedSize)
	case b[0] != WireVersion:
		return fmt.Errorf("edict: decode %s: unknown version byte %d (want %d)", what, b[0], WireVersion)
	}
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("edict: decode %s: %w", what, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return fmt.Errorf("edict: decode %s: %d trailing bytes", what, len(b)-1-n)
	}
	return nil
}

// The types do not implement encoding.BinaryMarshaler on purpose: msgpack
// codecs call it, and a Stamp embedded in a larger message (a log entry, a
// transport frame) should encode as a plain msgpack map under that
// message's own version byte. Decoders of such messages call WellFormed.

// EncodeTime encodes t with a version byte.
func EncodeTime(t Time) ([]byte, error) { return encode(t) }

// DecodeTime decodes a Time written by EncodeTime.
func DecodeTime(b []byte) (Time, error) {
	var t Time
	err := decode("time", b, &t)
	return t, err
}

// EncodeQT encodes qt with a version byte. It refuses a malformed QT.
func EncodeQT(qt QT) ([]byte, error) {
	if err := qt.WellFormed(); err != nil {
		return nil, err
	}
	return encode([]Reading(qt))
}

// DecodeQT decodes a QT and checks its structure (sorted, no duplicates,
// no ⊥, at most MaxQTSize readings). Whether it covers a quorum depends on
// the epoch: call Validate.
func DecodeQT(b []byte) (QT, error) {
	var rs []Reading
	if err := decode("quorum timestamp", b, &rs); err != nil {
		return nil, err
	}
	qt := QT(rs)
	if err := qt.WellFormed(); err != nil {
		return nil, fmt.Errorf("edict: decode quorum timestamp: %w", err)
	}
	return qt, nil
}

// EncodeStamp encodes s with a version byte.
func EncodeStamp(s Stamp) ([]byte, error) {
	if err := s.WellFormed(); err != nil {
		return nil, fmt.Errorf("edict: encode stamp: %w", err)
	}
	return encode(s)
}

// DecodeStamp decodes a Stamp and checks its structure. Whether its epoch
// is known and its QT covers a quorum is for Validate.
func DecodeStamp(b []byte) (Stamp, error) {
	var s Stamp
	if err := decode("stamp", b, &s); err != nil {
		return Stamp{}, err
	}
	if err := s.WellFormed(); err != nil {
		return Stamp{}, fmt.Errorf("edict: decode stamp: %w", err)
	}
	return s, nil
}
