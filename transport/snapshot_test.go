package transport

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// patternReader yields n pseudo-random bytes without holding them.
type patternReader struct {
	rng  *rand.ChaCha8
	left int64
}

func newPattern(seed byte, n int64) *patternReader {
	var s [32]byte
	s[0] = seed
	return &patternReader{rng: rand.NewChaCha8(s), left: n}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	p.rng.Read(b)
	p.left -= int64(len(b))
	return len(b), nil
}

func patternSum(seed byte, n int64) [32]byte {
	h := sha256.New()
	io.Copy(h, newPattern(seed, n))
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

func testMeta(size int64) wire.SnapshotHeader {
	return wire.SnapshotHeader{Epoch: 1, Reign: wiretest.Stamp(1, 10, 0), LastIndex: 100, LastStamp: wiretest.Stamp(1, 20, 100), Members: []edict.ProcessID{1, 2, 3}, Size: size,
		Addrs: map[edict.ProcessID]string{3: "127.0.0.1:3"}}
}

// snapshotTransports gives the snapshot tests a pair of transports.
func snapshotTransports(t *testing.T) map[string][2]*tcpNode {
	t.Helper()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.SnapshotChunkSize = 64 << 10 })
	return map[string][2]*tcpNode{"tcp": {n[0], n[1]}}
}

func TestSnapshotStream(t *testing.T) {
	t.Parallel()
	for name, tr := range snapshotTransports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const size = 5<<20 + 12345
			done := make(chan error, 1)
			go func() { done <- tr[0].SendSnapshot(ctxT(t, 10*time.Second), 2, testMeta(size), newPattern(7, size)) }()
			var s *wire.IncomingSnapshot
			select {
			case s = <-tr[1].Snapshots():
			case <-time.After(5 * time.Second):
				t.Fatal("no snapshot offered")
			}
			if s.From != 1 || s.Header.LastIndex != 100 || s.Header.Size != size || s.Header.Addrs[3] != "127.0.0.1:3" {
				t.Fatalf("snapshot from %v meta %+v", s.From, s.Header)
			}
			h := sha256.New()
			n, err := io.Copy(h, s)
			if err != nil || n != size {
				t.Fatalf("read %d bytes, err %v", n, err)
			}
			if got, want := [32]byte(h.Sum(nil)), patternSum(7, size); got != want {
				t.Fatal("snapshot content differs")
			}
			if err := s.Finish(nil); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("SendSnapshot: %v", err)
			}
		})
	}
}

func TestSnapshotRejected(t *testing.T) {
	t.Parallel()
	for name, tr := range snapshotTransports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// 1 GiB: the sender must notice the refusal and stop, not
			// stream it all.
			const size = 1 << 30
			done := make(chan error, 1)
			go func() { done <- tr[0].SendSnapshot(ctxT(t, 10*time.Second), 2, testMeta(size), newPattern(1, size)) }()
			s := <-tr[1].Snapshots()
			start := time.Now()
			io.CopyN(io.Discard, s, 1000)
			s.Finish(errors.New("disk full"))
			err := <-done
			if !errors.Is(err, ErrSnapshotRejected) || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("SendSnapshot after a refusal: %v", err)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("sender took %v to notice the refusal", el)
			}
			t.Log(err)
		})
	}
}

// TestSnapshotSizeMismatch: a source shorter or longer than its meta says
// fails the sender, and the receiver never sees a clean end of stream.
func TestSnapshotSizeMismatch(t *testing.T) {
	t.Parallel()
	for name, tr := range snapshotTransports(t) {
		for _, tc := range []struct {
			name   string
			actual int64
		}{{"short", 100_000}, {"long", 300_000}} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				done := make(chan error, 1)
				go func() {
					done <- tr[0].SendSnapshot(ctxT(t, 10*time.Second), 2, testMeta(200_000), newPattern(2, tc.actual))
				}()
				s := <-tr[1].Snapshots()
				_, rerr := io.Copy(io.Discard, s)
				if rerr == nil {
					t.Fatal("receiver read a wrong-sized snapshot to a clean end")
				}
				s.Finish(rerr)
				if err := <-done; err == nil || !strings.Contains(err.Error(), "snapshot source") {
					t.Fatalf("sender: %v", err)
				}
			})
		}
	}
}

func TestSnapshotNotTaken(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.HandshakeTimeout = 200 * time.Millisecond })
	err := n[0].SendSnapshot(ctxT(t, 5*time.Second), 2, testMeta(10), bytes.NewReader(make([]byte, 10)))
	if !errors.Is(err, ErrSnapshotRejected) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("snapshot nobody took: %v", err)
	}
}

// stallingReader yields n bytes, then blocks until release is closed.
type stallingReader struct {
	r       io.Reader
	left    int64
	release chan struct{}
}

func (s *stallingReader) Read(b []byte) (int, error) {
	if s.left == 0 {
		<-s.release
		return 0, errors.New("released")
	}
	if int64(len(b)) > s.left {
		b = b[:s.left]
	}
	n, err := s.r.Read(b)
	s.left -= int64(n)
	return n, err
}

// A receiver that gives up on a stream (Abort) is not held by a sender
// that has stalled: the read waiting for the next chunk fails at once,
// not after the connection's idle timeout (60 s).
func TestSnapshotAbortUnblocksARead(t *testing.T) {
	t.Parallel()
	for name, tr := range snapshotTransports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const size = 1 << 20
			release := make(chan struct{})
			defer close(release)
			go tr[0].SendSnapshot(ctxT(t, 30*time.Second), 2, testMeta(size), &stallingReader{r: newPattern(3, size), left: 100 << 10, release: release})
			s := <-tr[1].Snapshots()
			read := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, s)
				read <- err
			}()
			// The read is blocked on the stalled sender by then, within a
			// frame or between two.
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			s.Abort()
			select {
			case err := <-read:
				if err == nil {
					t.Fatal("an aborted stream read to its end")
				}
				t.Logf("read after Abort, %v later: %v", time.Since(start), err)
			case <-time.After(5 * time.Second):
				t.Fatal("Abort did not unblock the read")
			}
			s.Finish(errors.New("receiver stopped"))
		})
	}
}

// A sender whose source stalls between chunks has sent every chunk it
// read whole: the receiver reads them all at once, and does not sit
// inside a frame whose tail waits in the sender's buffer.
func TestSnapshotChunksLeaveWhole(t *testing.T) {
	t.Parallel()
	for name, tr := range snapshotTransports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const size, chunk = 1 << 20, 64 << 10
			release := make(chan struct{})
			defer close(release)
			go tr[0].SendSnapshot(ctxT(t, 30*time.Second), 2, testMeta(size), &stallingReader{r: newPattern(5, size), left: 2 * chunk, release: release})
			s := <-tr[1].Snapshots()
			read := make(chan error, 1)
			go func() {
				_, err := io.CopyN(io.Discard, s, 2*chunk)
				read <- err
			}()
			select {
			case err := <-read:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the chunks the sender read did not all arrive while its source stalled")
			}
			s.Abort()
			s.Finish(errors.New("receiver stopped"))
		})
	}
}
