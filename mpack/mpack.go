// Package mpack is the small subset of MessagePack that edictlog's
// records use: unsigned and signed integers, booleans, nil, strings, bin,
// arrays, maps, and structs as maps keyed by their field names. It is
// written by hand only so that the pure packages (edict, wire) need not
// import go-msgpack (github.com/hashicorp/go-msgpack/v2), whose codec
// package pulls in net/rpc and with it net/http and crypto/tls; the log,
// which imports them, should link none of that. The I/O packages
// (storage, transport) still use go-msgpack for their own formats. (The
// name is not msgpack so that a search of the log's dependencies for
// "msgpack" finds go-msgpack alone.)
//
// The records were written by go-msgpack before, and stay readable both
// ways: the Append functions write exactly the bytes go-msgpack writes with
// the handle edictlog's records used (WriteExt, so []byte as bin and
// strings as str with str8; every integer in its shortest form, an int64
// in signed forms above 127; a nil slice or map as nil), and a Reader in
// Codec mode accepts what any go-msgpack encoder may have written for the
// same types (see Mode). The callers write a struct's fields in the order
// go-msgpack does: sorted by their names, an omitempty field left out when
// it is empty.
//
// A Reader never panics and checks every length against the input left
// before it allocates, so a hostile length costs nothing.
//
// The package is importable because edict and wire, which are, use it; it
// promises no more than those records need, and no package of the
// library's imports anything internal.
package mpack

import "math"

// The format bytes this package writes and reads.
const (
	nilByte    = 0xc0
	falseByte  = 0xc2
	trueByte   = 0xc3
	bin8       = 0xc4
	bin16      = 0xc5
	bin32      = 0xc6
	uint8Byte  = 0xcc
	uint16Byte = 0xcd
	uint32Byte = 0xce
	uint64Byte = 0xcf
	int8Byte   = 0xd0
	int16Byte  = 0xd1
	int32Byte  = 0xd2
	int64Byte  = 0xd3
	str8       = 0xd9
	str16      = 0xda
	str32      = 0xdb
	array16    = 0xdc
	array32    = 0xdd
	map16      = 0xde
	map32      = 0xdf
	fixMap     = 0x80 // to 0x8f
	fixArray   = 0x90 // to 0x9f
	fixStr     = 0xa0 // to 0xbf
	negFixInt  = 0xe0 // to 0xff
)

// AppendNil appends nil.
func AppendNil(dst []byte) []byte { return append(dst, nilByte) }

// AppendBool appends b.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, trueByte)
	}
	return append(dst, falseByte)
}

// AppendUint appends v in its shortest unsigned form.
func AppendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, uint8Byte, byte(v))
	case v <= math.MaxUint16:
		return append(dst, uint16Byte, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(dst, uint32Byte, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, uint64Byte, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// AppendInt appends v as go-msgpack writes a signed integer: a fixint in
// [-32, 127], else the shortest signed form (also for positive values).
func AppendInt(dst []byte, v int64) []byte {
	switch {
	case v > math.MaxInt8:
		switch {
		case v <= math.MaxInt16:
			return append(dst, int16Byte, byte(v>>8), byte(v))
		case v <= math.MaxInt32:
			return append(dst, int32Byte, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		}
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, int8Byte, byte(v))
	case v >= math.MinInt16:
		return append(dst, int16Byte, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(dst, int32Byte, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	u := uint64(v)
	return append(dst, int64Byte, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// AppendStr appends s as a str (fixstr, str8, str16 or str32). Field names
// are strings too.
func AppendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, fixStr|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, str8, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, str16, byte(n>>8), byte(n))
	default:
		dst = append(dst, str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

// AppendBin appends b as a bin, or nil when b is nil (an empty non-nil b is
// a bin of length 0, as go-msgpack writes it).
func AppendBin(dst, b []byte) []byte {
	if b == nil {
		return append(dst, nilByte)
	}
	n := len(b)
	switch {
	case n <= math.MaxUint8:
		dst = append(dst, bin8, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, bin16, byte(n>>8), byte(n))
	default:
		dst = append(dst, bin32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
}

// AppendArrayLen appends the header of an array of n elements.
func AppendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, fixArray|byte(n))
	case n <= math.MaxUint16:
		return append(dst, array16, byte(n>>8), byte(n))
	}
	return append(dst, array32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// AppendMapLen appends the header of a map of n pairs (a struct of n
// fields).
func AppendMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, fixMap|byte(n))
	case n <= math.MaxUint16:
		return append(dst, map16, byte(n>>8), byte(n))
	}
	return append(dst, map32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
