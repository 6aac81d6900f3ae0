package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/edictlog/edictlog/edict"
)

// Mem is an in-memory Transport on a Network, for tests. Messages go
// through the same codec as on TCP (so a receiver gets its own copy, and a
// message TCP would refuse is refused here too), then through the faults
// the Network is set to inject on that link.
type Mem struct {
	net   *Network
	id    edict.ProcessID
	inbox *inbox
	snaps chan *IncomingSnapshot

	closing   chan struct{}
	closeOnce sync.Once
	// snapsMu is held (shared) by senders offering a stream on snaps and
	// (exclusively) by Close to close it, so no send meets a closed
	// channel.
	snapsMu sync.RWMutex

	mu    sync.Mutex
	peers map[edict.ProcessID]string
}

var _ Transport = (*Mem)(nil)

// ID implements Transport.
func (m *Mem) ID() edict.ProcessID { return m.id }

// LocalAddr implements Transport: "mem:<id>".
func (m *Mem) LocalAddr() string { return memAddr(m.id) }

func memAddr(id edict.ProcessID) string { return fmt.Sprintf("mem:%d", uint64(id)) }

// Receive implements Transport.
func (m *Mem) Receive() <-chan Message { return m.inbox.out }

// Snapshots implements Transport.
func (m *Mem) Snapshots() <-chan *IncomingSnapshot { return m.snaps }

// AddPeer implements Transport. The address is ignored: on a Network every
// process is reached by its id.
func (m *Mem) AddPeer(id edict.ProcessID, addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.id && id != edict.None {
		m.peers[id] = addr
	}
}

// RemovePeer implements Transport.
func (m *Mem) RemovePeer(id edict.ProcessID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.peers, id)
}

// SetPeers implements Transport.
func (m *Mem) SetPeers(peers map[edict.ProcessID]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers = maps.Clone(peers)
	delete(m.peers, m.id)
}

func (m *Mem) knows(id edict.ProcessID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.peers[id]
	return ok || id == m.id
}

func (m *Mem) isClosing() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// Send implements Transport. It never waits: a message the link drops, or
// that finds the receiver's inbox full or the receiver closed, is lost
// (and counted in the Network's Stats), as on a real network.
func (m *Mem) Send(ctx context.Context, to edict.ProcessID, msg Message) error {
	if m.isClosing() {
		return ErrClosed
	}
	if err := addressMessage(m.id, to, &msg); err != nil {
		return err
	}
	if !m.knows(to) {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	f, err := encodeMessageFrame(msg, DefaultMaxFrameSize)
	if err != nil {
		return err
	}
	body := f[frameHeaderSize:]
	// Decode here too, so that a message the receiver's decoder would
	// refuse fails its sender's test rather than vanishing as "lost".
	if _, err := decodeMessage(body); err != nil {
		return err
	}
	m.net.send(m.id, to, body)
	return nil
}

// SendSnapshot implements Transport. Of the link's faults only a cut
// (ErrUnreachable) and the delay apply: a stream is whole or broken, as
// over TCP.
func (m *Mem) SendSnapshot(ctx context.Context, to edict.ProcessID, meta SnapshotMeta, r io.Reader) error {
	if m.isClosing() {
		return ErrClosed
	}
	if err := meta.Validate(); err != nil {
		return err
	}
	if !m.knows(to) {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	dst, delay, ok := m.net.streamTo(m.id, to)
	if !ok {
		return fmt.Errorf("transport: send snapshot to %v: %w", to, ErrUnreachable)
	}
	if err := sleepCtx(ctx, delay); err != nil {
		return fmt.Errorf("transport: send snapshot to %v: %w", to, err)
	}
	pr, pw := io.Pipe()
	result := make(chan error, 1)
	sr := &sizedReader{r: pr, from: m.id, size: meta.Size, left: meta.Size}
	s := newIncomingSnapshot(m.id, meta, sr, func(installErr error) error {
		if installErr == nil && !sr.done {
			installErr = fmt.Errorf("receiver finished after reading %d of %d bytes", meta.Size-sr.left, meta.Size)
		}
		pr.CloseWithError(errors.New("receiver finished"))
		result <- installErr
		return nil
	})
	if err := dst.offer(ctx, s); err != nil {
		return fmt.Errorf("transport: send snapshot to %v: %w", to, err)
	}
	defer context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })()
	if srcErr := copySnapshot(pw, r, meta.Size); srcErr != nil {
		pw.CloseWithError(srcErr)
		return fmt.Errorf("transport: send snapshot to %v: %w", to, srcErr)
	}
	pw.Close()
	select {
	case rerr := <-result:
		if rerr != nil {
			return fmt.Errorf("transport: send snapshot to %v: %w: %s", to, ErrSnapshotRejected, truncateReason(rerr.Error()))
		}
		return nil
	case <-dst.closing:
		return fmt.Errorf("transport: send snapshot to %v: %w", to, ErrUnreachable)
	case <-ctx.Done():
		return fmt.Errorf("transport: send snapshot to %v: waiting for the result: %w", to, context.Cause(ctx))
	}
}

// copySnapshot copies exactly size bytes of r to w and checks that r ends
// there. It returns only errors of the source: a write error means the
// receiver stopped reading, and its verdict will say why.
func copySnapshot(w io.Writer, r io.Reader, size int64) error {
	buf := make([]byte, 32<<10)
	for sent := int64(0); sent < size; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-sent)])
		if err != nil {
			return fmt.Errorf("snapshot source ended after %d of %d bytes: %w", sent+int64(n), size, err)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return nil
		}
		sent += int64(n)
	}
	var one [1]byte
	if _, err := io.ReadFull(r, one[:]); err == nil {
		return fmt.Errorf("snapshot source holds more than the %d bytes its meta declares", size)
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("snapshot source: %w", err)
	}
	return nil
}

func (m *Mem) offer(ctx context.Context, s *IncomingSnapshot) error {
	m.snapsMu.RLock()
	defer m.snapsMu.RUnlock()
	if m.isClosing() {
		return ErrUnreachable
	}
	select {
	case m.snaps <- s:
		return nil
	case <-m.closing:
		return ErrUnreachable
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close implements Transport. The process stays on its Network as a
// crashed one: messages to it are lost until Network.Node makes it anew.
func (m *Mem) Close() error {
	m.closeOnce.Do(func() {
		close(m.closing)
		// The process stays on its Network, so messages to it are lost at
		// the receiver, as to a crashed host.
		m.inbox.close()
		m.snapsMu.Lock()
		close(m.snaps)
		m.snapsMu.Unlock()
	})
	return nil
}

// sizedReader yields exactly size bytes from r, then io.EOF; a stream that
// ends early or runs long is an error, never a short snapshot.
type sizedReader struct {
	r    io.Reader
	from edict.ProcessID
	size int64
	left int64
	done bool // clean end reached
}

func (s *sizedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if s.left < 0 {
		return 0, fmt.Errorf("transport: snapshot from %v longer than the %d bytes declared", s.from, s.size)
	}
	if errors.Is(err, io.EOF) && s.left > 0 {
		return n, fmt.Errorf("transport: snapshot from %v cut short after %d of %d bytes: %w", s.from, s.size-s.left, s.size, io.ErrUnexpectedEOF)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("transport: snapshot from %v cut short after %d of %d bytes: %w", s.from, s.size-s.left, s.size, err)
	}
	if err != nil {
		s.done = true
	}
	return n, err
}
