package edict

import (
	"fmt"

	"github.com/edictlog/edictlog/mpack"
)

// WireVersion is the first byte of every encoded Time, QT and Stamp. A
// decoder refuses any other version instead of guessing at the layout.
const WireVersion byte = 1

// MaxQTSize bounds the readings in a decoded QT: no quorum of a practical
// epoch comes near it, and it keeps a hostile input from costing memory.
const MaxQTSize = 255

// MaxEncodedSize bounds the input the decoders accept.
const MaxEncodedSize = 16 << 10

// The encodings are the version byte and one msgpack value: the bytes
// go-msgpack (github.com/hashicorp/go-msgpack/v2, WriteExt) writes for the
// types and their codec tags, which wrote them until edict stopped
// importing it (mpack says why). A Time is the map {i, n}, a
// Reading {p, t}, a QT an array of readings (nil for a nil QT), a Stamp
// {c, e, q}: fields in the order of their names, as go-msgpack writes
// them. The decoders read whatever go-msgpack could have written for the
// types (mpack.Codec). Tests hold both to go-msgpack byte for byte.
//
// The types do not implement encoding.BinaryMarshaler on purpose: msgpack
// codecs call it, and a Stamp embedded in a larger message (a log entry, a
// transport frame) should encode as a plain msgpack map under that
// message's own version byte. Decoders of such messages call WellFormed.

var (
	timeFields    = []string{"i", "n"}
	readingFields = []string{"p", "t"}
	stampFields   = []string{"c", "e", "q"}
)

func appendTime(dst []byte, t *Time) []byte {
	dst = mpack.AppendMapLen(dst, 2)
	dst = mpack.AppendStr(dst, "i")
	dst = mpack.AppendUint(dst, t.Incarnation)
	dst = mpack.AppendStr(dst, "n")
	return mpack.AppendInt(dst, t.Nanos)
}

func appendQT(dst []byte, qt QT) []byte {
	if qt == nil {
		return mpack.AppendNil(dst)
	}
	dst = mpack.AppendArrayLen(dst, len(qt))
	for i := range qt {
		r := &qt[i]
		dst = mpack.AppendMapLen(dst, 2)
		dst = mpack.AppendStr(dst, "p")
		dst = mpack.AppendUint(dst, uint64(r.Process))
		dst = mpack.AppendStr(dst, "t")
		dst = appendTime(dst, &r.T)
	}
	return dst
}

// AppendStampMsgpack appends s as EncodeStamp writes it after its version
// byte, for the records that embed a stamp under a version byte of their
// own (package wire's entries and epoch configurations). It does not check
// s; a nil QT is written as nil, an empty one as an empty array.
func AppendStampMsgpack(dst []byte, s *Stamp) []byte {
	dst = mpack.AppendMapLen(dst, 3)
	dst = mpack.AppendStr(dst, "c")
	dst = mpack.AppendUint(dst, s.Counter)
	dst = mpack.AppendStr(dst, "e")
	dst = mpack.AppendUint(dst, s.Epoch)
	dst = mpack.AppendStr(dst, "q")
	return appendQT(dst, s.QT)
}

// ReadStampMsgpack reads a stamp written by AppendStampMsgpack from r, for
// the decoders of records that embed one (the reader's type is internal to
// edictlog); what names it in errors. Structs read as r's mode says; a nil
// QT reads as nil, an empty array as an empty QT. It bounds the QT by
// MaxQTSize and checks nothing else: the caller calls WellFormed.
func ReadStampMsgpack(r *mpack.Reader, what string) Stamp {
	var s Stamp
	r.Fields(what, stampFields, func(name string) {
		switch name {
		case "c":
			s.Counter = r.Uint("counter")
		case "e":
			s.Epoch = r.Uint("epoch")
		case "q":
			s.QT = readQT(r, what)
		}
	})
	return s
}

func readTime(r *mpack.Reader, what string, t *Time) {
	r.Fields(what, timeFields, func(name string) {
		switch name {
		case "i":
			t.Incarnation = r.Uint("incarnation")
		case "n":
			t.Nanos = r.Int("nanos")
		}
	})
}

func readQT(r *mpack.Reader, what string) QT {
	n, isNil := r.ArrayLen(what, MaxQTSize)
	if isNil || r.Err() != nil {
		return nil
	}
	qt := make(QT, n)
	for i := range qt {
		rd := &qt[i]
		r.Fields("reading", readingFields, func(name string) {
			switch name {
			case "p":
				rd.Process = ProcessID(r.Uint("process"))
			case "t":
				readTime(r, "time", &rd.T)
			}
		})
		if r.Err() != nil {
			return nil
		}
	}
	return qt
}

// decode checks the version byte and size, reads exactly one value with
// read and refuses trailing bytes.
func decode(what string, b []byte, read func(r *mpack.Reader)) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("edict: decode %s: empty input", what)
	case len(b) > MaxEncodedSize:
		return fmt.Errorf("edict: decode %s: %d bytes exceeds the limit of %d", what, len(b), MaxEncodedSize)
	case b[0] != WireVersion:
		return fmt.Errorf("edict: decode %s: unknown version byte %d (want %d)", what, b[0], WireVersion)
	}
	r := mpack.NewReader(b, 1, mpack.Codec)
	read(&r)
	r.End()
	if err := r.Err(); err != nil {
		return fmt.Errorf("edict: decode %s: %w", what, err)
	}
	return nil
}

// EncodeTime encodes t with a version byte.
func EncodeTime(t Time) ([]byte, error) {
	return appendTime([]byte{WireVersion}, &t), nil
}

// DecodeTime decodes a Time written by EncodeTime.
func DecodeTime(b []byte) (Time, error) {
	var t Time
	err := decode("time", b, func(r *mpack.Reader) { readTime(r, "time", &t) })
	if err != nil {
		return Time{}, err
	}
	return t, nil
}

// EncodeQT encodes qt with a version byte. It refuses a malformed QT.
func EncodeQT(qt QT) ([]byte, error) {
	if err := qt.WellFormed(); err != nil {
		return nil, err
	}
	return appendQT([]byte{WireVersion}, qt), nil
}

// DecodeQT decodes a QT and checks its structure (sorted, no duplicates,
// no ⊥, at most MaxQTSize readings). Whether it covers a quorum depends on
// the epoch: call Validate.
func DecodeQT(b []byte) (QT, error) {
	var qt QT
	if err := decode("quorum timestamp", b, func(r *mpack.Reader) { qt = readQT(r, "quorum timestamp") }); err != nil {
		return nil, err
	}
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
	return AppendStampMsgpack([]byte{WireVersion}, &s), nil
}

// DecodeStamp decodes a Stamp and checks its structure. Whether its epoch
// is known and its QT covers a quorum is for Validate.
func DecodeStamp(b []byte) (Stamp, error) {
	var s Stamp
	if err := decode("stamp", b, func(r *mpack.Reader) { s = ReadStampMsgpack(r, "stamp") }); err != nil {
		return Stamp{}, err
	}
	if err := s.WellFormed(); err != nil {
		return Stamp{}, fmt.Errorf("edict: decode stamp: %w", err)
	}
	return s, nil
}
