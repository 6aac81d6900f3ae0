package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/edictlog/edictlog/wire/wiretest"
)

// The fuzz targets hold every decoder to the package's promise: any input
// yields a value or an error, never a panic, and whatever decodes
// re-encodes to something that decodes to the same value.

func FuzzDecodeFrame(f *testing.F) {
	for _, m := range wiretest.Messages() {
		b, _ := encodeMessageFrame(m, DefaultMaxFrameSize)
		f.Add(b)
	}
	f.Add(header(0, FrameVersion))
	f.Add(header(5, 9))
	f.Add(append(header(1<<20, FrameVersion), 1, 2, 3))
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := newFrameReader(bytes.NewReader(in), 64<<10)
		var out bytes.Buffer
		for {
			body, err := fr.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrFrameVersion) &&
					!errors.Is(err, ErrFrameEmpty) && !errors.Is(err, ErrFrameTrunc) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				break
			}
			if err := writeFrameTo(&out, body); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatal("re-encoded frames differ from the input they came from")
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	for _, h := range []hello{
		{Cluster: "test", From: 1, To: 2, Lane: 1},
		{Cluster: "test", From: 1, To: 2, Lane: 2, Window: 64, Addr: "10.0.0.1:7000", Incarnation: 12},
		{Cluster: "test", From: 3, To: 1, Lane: 3, Addr: "[::1]:7000", Incarnation: 1 << 40},
	} {
		b, _ := encodeFrame("hello", &h, maxHandshakeFrame)
		f.Add(b[frameHeaderSize:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := decodeHello(body)
		if err != nil {
			return
		}
		b, err := encodeFrame("hello", &h, maxHandshakeFrame)
		if err != nil {
			t.Fatal(err)
		}
		if h2, err := decodeHello(b[frameHeaderSize:]); err != nil || h2 != h {
			t.Fatalf("round trip: %+v → %+v, %v", h, h2, err)
		}
	})
}

func FuzzDecodeHelloReply(f *testing.F) {
	for _, r := range []helloReply{{OK: true}, {Reason: "cluster id mismatch"}} {
		b, _ := encodeFrame("reply", &r, maxHandshakeFrame)
		f.Add(b[frameHeaderSize:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeHelloReply(body)
		if err != nil {
			return
		}
		if r.OK == (r.Reason != "") {
			t.Fatalf("accepted an inconsistent reply %+v", r)
		}
	})
}

func FuzzDecodeAck(f *testing.F) {
	b, _ := encodeFrame("ack", uint64(12345), maxHandshakeFrame)
	f.Add(b[frameHeaderSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeAck(body)
	})
}

func FuzzDecodeSnapshotResult(f *testing.F) {
	for _, r := range []snapshotResult{{}, {Err: "disk full"}} {
		b, _ := encodeFrame("result", &r, maxHandshakeFrame)
		f.Add(b[frameHeaderSize:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeSnapshotResult(body)
		if err == nil && len(r.Err) > maxReasonLen {
			t.Fatalf("accepted a %d-byte error", len(r.Err))
		}
	})
}

// FuzzSnapshotStream feeds arbitrary bytes to the receiving side of a
// snapshot stream: it must end in io.EOF only after exactly Size bytes and
// an end frame.
func FuzzSnapshotStream(f *testing.F) {
	var ok bytes.Buffer
	writeFrameTo(&ok, []byte("hello"))
	writeFrameTo(&ok, nil)
	f.Add(ok.Bytes(), int64(5))
	f.Fuzz(func(t *testing.T, in []byte, size int64) {
		if size < 0 || size > 1<<20 {
			return
		}
		r := &snapshotReader{fr: newFrameReader(bufio.NewReader(bytes.NewReader(in)), 64<<10), from: 1, size: size, left: size}
		n, err := io.Copy(io.Discard, r)
		if err == nil && (n != size || !r.done) {
			t.Fatalf("clean end after %d of %d bytes", n, size)
		}
	})
}
