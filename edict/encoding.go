package edict

import (
	"errors"
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
	out := []byte{WireVersion}
	if err := codec.NewEncoderBytes(&out, mh).Encode(v); err != nil {
		return nil, fmt.Errorf("edict: encode %T: %w", v, err)
	}
	return out, nil
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

// MarshalBinary encodes t with a version byte.
func (t Time) MarshalBinary() ([]byte, error) { return encode(t) }

// UnmarshalBinary decodes a Time written by MarshalBinary.
func (t *Time) UnmarshalBinary(b []byte) error {
	var v Time
	if err := decode("time", b, &v); err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalBinary encodes qt with a version byte. It refuses a malformed QT.
func (qt QT) MarshalBinary() ([]byte, error) {
	if err := qt.wellFormed(); err != nil {
		return nil, err
	}
	return encode([]Reading(qt))
}

// UnmarshalBinary decodes a QT and checks its structure (sorted, no
// duplicates, no ⊥). Whether it covers a quorum depends on the epoch: call
// Validate.
func (qt *QT) UnmarshalBinary(b []byte) error {
	var rs []Reading
	if err := decode("quorum timestamp", b, &rs); err != nil {
		return err
	}
	v, err := checkDecodedQT(rs)
	if err != nil {
		return fmt.Errorf("edict: decode quorum timestamp: %w", err)
	}
	*qt = v
	return nil
}

func checkDecodedQT(rs []Reading) (QT, error) {
	if len(rs) > MaxQTSize {
		return nil, fmt.Errorf("%d readings exceeds the limit of %d", len(rs), MaxQTSize)
	}
	qt := QT(rs)
	if err := qt.wellFormed(); err != nil {
		return nil, err
	}
	return qt, nil
}

// MarshalBinary encodes s with a version byte.
func (s Stamp) MarshalBinary() ([]byte, error) {
	if !s.IsZero() {
		if err := s.QT.wellFormed(); err != nil {
			return nil, fmt.Errorf("edict: encode stamp: %w", err)
		}
	}
	return encode(s)
}

// UnmarshalBinary decodes a Stamp and checks its structure. Whether its
// epoch is known and its QT covers a quorum is for Validate.
func (s *Stamp) UnmarshalBinary(b []byte) error {
	var v Stamp
	if err := decode("stamp", b, &v); err != nil {
		return err
	}
	if !v.IsZero() {
		if len(v.QT) == 0 {
			return errors.New("edict: decode stamp: non-zero stamp without a quorum timestamp")
		}
		qt, err := checkDecodedQT(v.QT)
		if err != nil {
			return fmt.Errorf("edict: decode stamp: %w", err)
		}
		v.QT = qt
	}
	*s = v
	return nil
}
