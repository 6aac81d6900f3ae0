package transport

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/wire"
)

func newHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true} // WriteExt: []byte as bin, not str
	h.ErrorIfNoField = true
	// A declared container length allocates at most this many elements
	// up front; the rest grows as elements actually decode, so a frame
	// that claims a huge array costs nothing before it runs out of bytes.
	h.MaxInitLen = 256
	return h
}

var handle = newHandle()

// Encoders and decoders are pooled: constructing one per message is a
// measurable share of a small message's cost.
var (
	encoders = sync.Pool{New: func() any { return codec.NewEncoderBytes(nil, handle) }}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, handle) }}
	scratch  = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

// encodeFrame returns a complete frame (length, version byte, msgpack of v),
// or an error if it would exceed maxFrame.
func encodeFrame(what string, v any, maxFrame int) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	enc := encoders.Get().(*codec.Encoder)
	defer encoders.Put(enc)
	enc.ResetBytes(bp)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("transport: encode %s: %w", what, err)
	}
	body := *bp
	if cap(body) > 1<<20 {
		// Do not let one huge append pin a megabyte buffer in the pool.
		*bp = make([]byte, 0, 4096)
	}
	if n := 1 + len(body); n > maxFrame {
		return nil, fmt.Errorf("transport: %s: %w: %d bytes, limit %d", what, ErrFrameTooLarge, n, maxFrame)
	}
	f := make([]byte, frameHeaderSize+len(body))
	putFrameHeader(f, len(body))
	copy(f[frameHeaderSize:], body)
	return f, nil
}

// encodeMessageFrame validates m and returns its frame: the frame header,
// then the message as appendMessage encodes it.
func encodeMessageFrame(m wire.Message, maxFrame int) ([]byte, error) {
	f, err := appendMessage(make([]byte, frameHeaderSize, frameHeaderSize+messageSizeHint(m)), m)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	return finishFrame(m.Kind().String()+" message", f, maxFrame)
}

// encodeSnapshotHeaderFrame validates h and returns its frame.
func encodeSnapshotHeaderFrame(h wire.SnapshotHeader, maxFrame int) ([]byte, error) {
	f, err := appendSnapshotHeader(make([]byte, frameHeaderSize, frameHeaderSize+256), h)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	return finishFrame("snapshot header", f, maxFrame)
}

// finishFrame writes the header of f, a frame header's room followed by a
// body, after checking its size.
func finishFrame(what string, f []byte, maxFrame int) ([]byte, error) {
	n := len(f) - frameHeaderSize
	if 1+n > maxFrame {
		return nil, fmt.Errorf("transport: %s: %w: %d bytes, limit %d", what, ErrFrameTooLarge, 1+n, maxFrame)
	}
	putFrameHeader(f, n)
	return f, nil
}

// decodeBody decodes exactly one msgpack value from body into v and
// refuses trailing bytes: a frame holds one value, and bytes after it are a
// bug or an attack, not padding.
func decodeBody(what string, body []byte, v any) error {
	if len(body) == 0 {
		return fmt.Errorf("transport: decode %s: empty body", what)
	}
	dec := decoders.Get().(*codec.Decoder)
	defer decoders.Put(dec)
	dec.ResetBytes(body)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("transport: decode %s: %w", what, err)
	}
	if n := dec.NumBytesRead(); n != len(body) {
		return fmt.Errorf("transport: decode %s: %d trailing bytes", what, len(body)-n)
	}
	return nil
}
