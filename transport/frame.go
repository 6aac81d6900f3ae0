package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// FrameVersion is the version byte of every frame. A receiver refuses a
// frame of any other version and closes the connection: guessing at an
// unknown layout is how corrupt data gets accepted.
const FrameVersion byte = 10

// DefaultMaxFrameSize bounds a frame (version byte and body) unless
// configured otherwise.
const DefaultMaxFrameSize = 16 << 20

// frameHeaderSize is the 4-byte big-endian length and the version byte.
const frameHeaderSize = 5

// Frame errors. Each closes the connection it happened on, and only that
// one.
var (
	ErrFrameTooLarge = errors.New("frame exceeds the size limit")
	ErrFrameVersion  = errors.New("unknown frame version")
	ErrFrameEmpty    = errors.New("frame without a version byte")
	ErrFrameTrunc    = errors.New("truncated frame")
)

// putFrameHeader writes the header for a body of n bytes into f[:5].
func putFrameHeader(f []byte, n int) {
	binary.BigEndian.PutUint32(f, uint32(1+n))
	f[4] = FrameVersion
}

// frameReader reads frames from a stream. It allocates for a frame only
// as its bytes arrive, so a length prefix that promises 16 MiB and
// delivers nothing costs nothing, and it hands back a buffer it reuses:
// a body is valid until the next call.
type frameReader struct {
	r   io.Reader
	max int
	// onFrame, if set, is told when a frame's first byte has been read and
	// when the frame is complete; the connection uses it to switch between
	// its idle and mid-frame read deadlines.
	onFrame func(inFrame bool)
	hdr     [frameHeaderSize]byte
	buf     []byte
}

// growStep is how much of a large frame is allocated at a time.
const growStep = 256 << 10

func newFrameReader(r io.Reader, maxFrame int) *frameReader {
	return &frameReader{r: r, max: maxFrame}
}

// next returns the body of the next frame. At a clean end of stream
// (between frames) it returns io.EOF; every other error describes what was
// wrong with the frame.
func (fr *frameReader) next() ([]byte, error) {
	if fr.onFrame != nil {
		defer fr.onFrame(false)
	}
	// Read the first byte alone so that "no more frames" (io.EOF) can be
	// told from "a frame cut short".
	if _, err := io.ReadFull(fr.r, fr.hdr[:1]); err != nil {
		return nil, err
	}
	if fr.onFrame != nil {
		fr.onFrame(true)
	}
	if _, err := io.ReadFull(fr.r, fr.hdr[1:]); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFrameTrunc, unexpected(err))
	}
	n := int64(binary.BigEndian.Uint32(fr.hdr[:4]))
	switch {
	case n == 0:
		return nil, ErrFrameEmpty
	case n > int64(fr.max):
		return nil, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, fr.max)
	case fr.hdr[4] != FrameVersion:
		return nil, fmt.Errorf("%w: version byte %d, want %d", ErrFrameVersion, fr.hdr[4], FrameVersion)
	}
	body := int(n) - 1
	if cap(fr.buf) > growStep && body <= growStep {
		fr.buf = nil // drop a large buffer once frames are small again
	}
	fr.buf = fr.buf[:0]
	for len(fr.buf) < body {
		step := min(body-len(fr.buf), growStep)
		if cap(fr.buf)-len(fr.buf) < step {
			// Double, so a large frame costs O(size) in copies, but never
			// beyond what the header promised.
			nb := make([]byte, len(fr.buf), min(max(2*cap(fr.buf), len(fr.buf)+step), body))
			copy(nb, fr.buf)
			fr.buf = nb
		}
		start := len(fr.buf)
		fr.buf = fr.buf[:start+step]
		if n, err := io.ReadFull(fr.r, fr.buf[start:]); err != nil {
			return nil, fmt.Errorf("%w: got %d of %d body bytes: %w", ErrFrameTrunc, start+n, body, unexpected(err))
		}
	}
	return fr.buf, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writeFrameTo writes a frame holding body (without its header) to w.
func writeFrameTo(w io.Writer, body []byte) error {
	var hdr [frameHeaderSize]byte
	putFrameHeader(hdr[:], len(body))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}
