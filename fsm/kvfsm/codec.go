package kvfsm

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// WireVersion is the first byte of every encoded command, query and result.
// A decoder refuses any other version instead of guessing at the layout.
const WireVersion byte = 1

// Size limits. How large a key or value a client may write is the server's
// policy; these are the decoders' hard bounds against hostile or corrupt
// input.
const (
	// MaxKeySize bounds every key and range end.
	MaxKeySize = 64 << 10
	// MaxCommandSize bounds an encoded command, and so every value.
	MaxCommandSize = 64 << 20
	// MaxQuerySize bounds an encoded query: a Range of two keys.
	MaxQuerySize = 2*MaxKeySize + 1<<10
	// MaxResultSize bounds an encoded result; Query refuses a range whose
	// answer would exceed it (narrow the range or set a Limit).
	MaxResultSize = 256 << 20
)

// The handle is configured like edict's: unknown fields are errors, and
// declared collection lengths are not trusted for preallocation. Keys and
// values are strings on purpose: go-msgpack decodes a string from a byte
// slice with one exact allocation, whereas it grows a []byte in MaxInitLen
// steps, which is quadratic for large values.
var mh = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}()

// Encoders and decoders are pooled: building a go-msgpack Encoder or
// Decoder costs more than coding a small command, and Apply and Query are
// hot paths (docs/architecture.md, "Performance principles").
type pooledEncoder struct {
	enc *codec.Encoder
	buf []byte
}

var (
	encoders = sync.Pool{New: func() any {
		e := &pooledEncoder{}
		e.enc = codec.NewEncoderBytes(&e.buf, mh)
		return e
	}}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, mh) }}
	// noInput is what a pooled decoder is reset to, so that it does not
	// keep the last input alive. ResetBytes ignores nil.
	noInput = []byte{}
)

// maxPooledBuffer bounds the scratch buffer an encoder keeps between uses,
// so that one large command does not pin its size in the pool.
const maxPooledBuffer = 64 << 10

// encode writes the version byte and the msgpack form of v.
func encode(what string, v any, limit int) ([]byte, error) {
	e := encoders.Get().(*pooledEncoder)
	defer func() {
		if cap(e.buf) > maxPooledBuffer {
			e.buf = nil
		}
		encoders.Put(e)
	}()
	// The encoder writes from the start of the buffer it is given, so the
	// body is copied behind the version byte: one exact allocation.
	e.buf = e.buf[:0]
	e.enc.ResetBytes(&e.buf)
	if err := e.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", what, err)
	}
	if n := len(e.buf) + 1; n > limit {
		return nil, invalid("encode "+what, fmt.Errorf("%d bytes exceeds the limit of %d", n, limit))
	}
	out := make([]byte, 1+len(e.buf))
	out[0] = WireVersion
	copy(out[1:], e.buf)
	return out, nil
}

// decode checks the version byte and size, decodes exactly one msgpack value
// into v and refuses trailing bytes.
func decode(what string, b []byte, limit int, v any) error {
	switch {
	case len(b) == 0:
		return invalid("decode "+what, fmt.Errorf("empty input"))
	case len(b) > limit:
		return invalid("decode "+what, fmt.Errorf("%d bytes exceeds the limit of %d", len(b), limit))
	case b[0] != WireVersion:
		return invalid("decode "+what, fmt.Errorf("unknown version byte %d (want %d)", b[0], WireVersion))
	}
	d := decoders.Get().(*codec.Decoder)
	defer func() {
		d.ResetBytes(noInput)
		decoders.Put(d)
	}()
	d.ResetBytes(b[1:]) // not nil: b has at least the version byte
	if err := d.Decode(v); err != nil {
		return invalid("decode "+what, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return invalid("decode "+what, fmt.Errorf("%d trailing bytes", len(b)-1-n))
	}
	return nil
}

// EncodeCommand validates c and encodes it with a version byte, for the
// Data of a log entry.
func EncodeCommand(c Command) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, invalid("encode command", err)
	}
	return encode("command", &c, MaxCommandSize)
}

// DecodeCommand decodes and validates a command written by EncodeCommand.
// Every error wraps ErrInvalid.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := decode("command", b, MaxCommandSize, &c); err != nil {
		return Command{}, err
	}
	if err := c.validate(); err != nil {
		return Command{}, invalid("decode command", err)
	}
	return c, nil
}

// EncodeQuery validates r and encodes it for Query.
func EncodeQuery(r Range) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, invalid("encode query", err)
	}
	return encode("query", &r, MaxQuerySize)
}

// DecodeQuery decodes and validates a query written by EncodeQuery. Every
// error wraps ErrInvalid.
func DecodeQuery(b []byte) (Range, error) {
	var r Range
	if err := decode("query", b, MaxQuerySize, &r); err != nil {
		return Range{}, err
	}
	if err := r.validate(); err != nil {
		return Range{}, invalid("decode query", err)
	}
	return r, nil
}

// EncodeResult encodes a result, as Query returns it.
func EncodeResult(r *Result) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, invalid("encode result", err)
	}
	return encode("result", r, MaxResultSize)
}

// DecodeResult decodes a result written by EncodeResult and checks its
// structure. Every error wraps ErrInvalid.
func DecodeResult(b []byte) (Result, error) {
	var r Result
	if err := decode("result", b, MaxResultSize, &r); err != nil {
		return Result{}, err
	}
	if err := r.validate(); err != nil {
		return Result{}, invalid("decode result", err)
	}
	return r, nil
}
