package edictlogtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// SendSnapshot implements edictlog.Transport. The stream is carried in pieces
// of NetworkConfig.SnapshotChunkSize, each a copy, with the source read
// only as the receiver reads: nothing holds the whole snapshot. As on TCP,
// the receiver reaches io.EOF only after exactly meta.Size bytes and only
// once the source has been checked to end there; a stream cut short (a
// cut, either end closing, the sender's context ending, a source that
// ends early or holds more) yields an error to the receiver instead.
func (t *Transport) SendSnapshot(ctx context.Context, to edict.ProcessID, meta wire.SnapshotHeader, r io.Reader) error {
	if t.isClosing() {
		return ErrClosed
	}
	if err := meta.Validate(); err != nil {
		return fmt.Errorf("edictlogtest: send snapshot: %w", err)
	}
	t.mu.Lock()
	addr, ok := t.peers[to]
	t.mu.Unlock()
	if !ok || to == t.id {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	n := t.net
	n.count(t.id, to, func(s *LinkStats) { s.Snapshots++ })
	failed := func(err error) error {
		n.count(t.id, to, func(s *LinkStats) { s.SnapshotsFailed++ })
		return fmt.Errorf("edictlogtest: send snapshot to %v: %w", to, err)
	}
	f, delay := n.decide(t.id, to)
	switch f {
	case fateCut:
		return failed(fmt.Errorf("%w: link cut", ErrUnreachable))
	case fateDropped:
		return failed(fmt.Errorf("%w: connection lost", ErrUnreachable))
	}
	dst := n.lookup(addr)
	if dst == nil || dst.id != to {
		return failed(fmt.Errorf("%w: no process %v at %q", ErrUnreachable, to, addr))
	}
	if err := sleep(ctx, delay, t.closing, dst.closing); err != nil {
		return failed(err)
	}

	s := &stream{
		src: t, dst: dst, size: meta.Size, left: meta.Size,
		chunks: make(chan []byte), abort: make(chan struct{}), result: make(chan error, 1), gaveUp: make(chan struct{}),
	}
	defer s.stop()
	in := wire.NewIncomingSnapshot(t.id, cloneHeader(meta), s, s.finish, s.giveUp)
	if err := dst.offer(ctx, in, t.closing); err != nil {
		return failed(err)
	}

	buf := make([]byte, n.cfg.SnapshotChunkSize)
	for sent := int64(0); sent < meta.Size; {
		k := int(min(int64(len(buf)), meta.Size-sent))
		k, err := io.ReadFull(r, buf[:k])
		if err != nil {
			return failed(fmt.Errorf("snapshot source ended after %d of %d bytes: %w", sent+int64(k), meta.Size, err))
		}
		if err := s.send(ctx, buf[:k]); err != nil {
			return failed(fmt.Errorf("after %d of %d bytes: %w", sent, meta.Size, err))
		}
		sent += int64(k)
	}
	var one [1]byte
	if _, err := io.ReadFull(r, one[:]); err == nil {
		return failed(fmt.Errorf("snapshot source holds more than the %d bytes its header declares", meta.Size))
	} else if !errors.Is(err, io.EOF) {
		return failed(fmt.Errorf("snapshot source: %w", err))
	}
	if err := s.send(ctx, nil); err != nil { // the end
		return failed(err)
	}
	select {
	case err := <-s.result:
		// The result travels back on the stream's own connection: a
		// cut of the link to → from loses it (the receiver has acted on
		// the snapshot, the sender cannot know), a drop does not, as a
		// lost packet does not break a TCP connection.
		if n.isCut(to, t.id) {
			n.count(to, t.id, func(s *LinkStats) { s.Cut++ })
			return failed(fmt.Errorf("%w: the receiver's result was lost to a cut", ErrUnreachable))
		}
		if derr := sleep(ctx, n.delay(to, t.id), t.closing, nil); derr != nil {
			return failed(derr)
		}
		if err != nil {
			return failed(err)
		}
		return nil
	case <-ctx.Done():
		return failed(fmt.Errorf("waiting for the result: %w", context.Cause(ctx)))
	case <-t.closing:
		return failed(ErrClosed)
	case <-dst.closing:
		return failed(fmt.Errorf("%w: receiver closed", ErrUnreachable))
	}
}

// offer hands in to the runtime through Snapshots, or tells the sender
// the receiver is busy.
func (t *Transport) offer(ctx context.Context, in *wire.IncomingSnapshot, srcClosing <-chan struct{}) error {
	t.snapMu.RLock()
	defer t.snapMu.RUnlock()
	if t.snapClosed {
		return fmt.Errorf("%w: receiver closed", ErrUnreachable)
	}
	busy := time.NewTimer(t.net.cfg.SnapshotTakeTimeout)
	defer busy.Stop()
	select {
	case t.snaps <- in:
		return nil
	case <-t.closing:
		return fmt.Errorf("%w: receiver closed", ErrUnreachable)
	case <-srcClosing:
		return ErrClosed
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-busy.C:
		return fmt.Errorf("%w: receiver busy: no one took the snapshot", ErrSnapshotRejected)
	}
}

func sleep(ctx context.Context, d time.Duration, a, b <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-a:
		return ErrClosed
	case <-b:
		return fmt.Errorf("%w: receiver closed", ErrUnreachable)
	}
}

// stream is one snapshot stream between two transports: the sender hands
// pieces over one at a time (a nil piece is the end), the receiver reads
// them.
type stream struct {
	src, dst *Transport
	size     int64

	chunks   chan []byte
	abort    chan struct{} // closed when the sender gives up
	stopOnce sync.Once
	result   chan error // the receiver's outcome, once
	// gaveUp is closed when the receiver gives up (IncomingSnapshot.Abort).
	gaveUp   chan struct{}
	giveUpMu sync.Once

	// Receiver side, used by Read only.
	left  int64
	chunk []byte
	done  bool
	err   error
}

func (s *stream) stop() { s.stopOnce.Do(func() { close(s.abort) }) }

// giveUp is the receiver's Abort.
func (s *stream) giveUp() { s.giveUpMu.Do(func() { close(s.gaveUp) }) }

// send hands b (copied) to the receiver, or the end if b is nil.
func (s *stream) send(ctx context.Context, b []byte) error {
	var piece []byte
	if b != nil {
		piece = append(make([]byte, 0, len(b)), b...)
	}
	select {
	case s.chunks <- piece:
		return nil
	case err := <-s.result:
		// The receiver gave up before the end.
		s.result <- err
		if err == nil {
			err = errors.New("receiver finished before the end of the stream")
		}
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.src.closing:
		return ErrClosed
	case <-s.dst.closing:
		return fmt.Errorf("%w: receiver closed", ErrUnreachable)
	}
}

// Read implements io.Reader for the receiver.
func (s *stream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	select {
	case <-s.gaveUp:
		return 0, s.fail(errors.New("the receiver gave up"))
	default:
	}
	if len(s.chunk) == 0 {
		if s.done {
			return 0, io.EOF
		}
		select {
		case c := <-s.chunks:
			if s.src.net.isCut(s.src.id, s.dst.id) {
				s.src.net.count(s.src.id, s.dst.id, func(st *LinkStats) { st.Cut++ })
				return 0, s.fail(errors.New("link cut"))
			}
			switch {
			case c == nil && s.left == 0:
				s.done = true
				return 0, io.EOF
			case c == nil:
				return 0, s.fail(errors.New("end of stream before the size declared"))
			case int64(len(c)) > s.left:
				return 0, s.fail(fmt.Errorf("stream longer than the %d bytes declared", s.size))
			}
			s.chunk = c
		case <-s.abort:
			return 0, s.fail(errors.New("sender gave up"))
		case <-s.gaveUp:
			return 0, s.fail(errors.New("the receiver gave up"))
		case <-s.dst.closing:
			return 0, s.fail(ErrClosed)
		}
	}
	k := copy(p, s.chunk)
	s.chunk = s.chunk[k:]
	s.left -= int64(k)
	return k, nil
}

func (s *stream) fail(err error) error {
	s.err = fmt.Errorf("edictlogtest: snapshot from %v cut short after %d of %d bytes: %w", s.src.id, s.size-s.left, s.size, err)
	return s.err
}

// finish is the receiver's Finish: its outcome goes back to the sender.
func (s *stream) finish(installErr error) error {
	if installErr == nil && !s.done {
		installErr = fmt.Errorf("receiver finished after reading %d of %d bytes", s.size-s.left, s.size)
	}
	if installErr != nil {
		installErr = fmt.Errorf("%w: %v", ErrSnapshotRejected, installErr)
	}
	s.result <- installErr
	return nil
}

func cloneHeader(h wire.SnapshotHeader) wire.SnapshotHeader {
	var out wire.SnapshotHeader
	deepCopy(refValue(&out), refValueOf(h))
	return out
}
