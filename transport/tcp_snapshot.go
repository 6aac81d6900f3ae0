package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// A snapshot stream, after the handshake on a connection of its own:
//
//	dialer → meta frame (SnapshotMeta), then chunk frames whose bodies are
//	         raw snapshot bytes, Size bytes in all, then one empty frame
//	         that says the source ended exactly there
//	receiver ← one result frame (snapshotResult) once the runtime called
//	         Finish
//
// The end frame is sent only after the source has been checked to hold no
// more than Size bytes, so a receiver never reaches io.EOF on a stream the
// sender considers wrong.

// SendSnapshot implements Transport.
func (t *TCP) SendSnapshot(ctx context.Context, to edict.ProcessID, meta wire.SnapshotHeader, r io.Reader) error {
	if t.isClosing() {
		return ErrClosed
	}
	mf, err := encodeSnapshotHeaderFrame(meta, t.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	p := t.peer(to)
	if p == nil {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	c, br, err := t.dial(ctx, to, p.getAddr(), laneSnapshot)
	if err != nil {
		return fmt.Errorf("transport: send snapshot to %v: %w", to, err)
	}
	if !t.track(c) {
		c.Close()
		return ErrClosed
	}
	defer t.untrack(c)
	defer c.Close()
	// Cancelling ctx closes the connection, which unblocks every write and
	// read below.
	defer context.AfterFunc(ctx, func() { c.Close() })()

	result := make(chan error, 1)
	go func() {
		body, err := newFrameReader(br, maxHandshakeFrame).next()
		if err != nil {
			result <- fmt.Errorf("reading snapshot result: %w", err)
			return
		}
		res, err := decodeSnapshotResult(body)
		switch {
		case err != nil:
			result <- err
		case res.Err != "":
			result <- fmt.Errorf("%w: %s", ErrSnapshotRejected, res.Err)
		default:
			result <- nil
		}
	}()
	fail := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("transport: send snapshot to %v: %w", to, context.Cause(ctx))
		}
		// A write fails when the receiver refused the snapshot and stopped
		// reading; its verdict, if it arrives, explains more than "broken
		// pipe". Wait a little for it.
		wait := time.NewTimer(time.Second)
		defer wait.Stop()
		select {
		case rerr := <-result:
			if rerr != nil && errors.Is(rerr, ErrSnapshotRejected) {
				err = rerr
			}
		case <-wait.C:
		}
		return fmt.Errorf("transport: send snapshot to %v: %w", to, err)
	}

	bw := bufio.NewWriterSize(c, t.cfg.SnapshotChunkSize+2*frameHeaderSize)
	// Every chunk's frame leaves whole before the source is read again: a
	// source that is slow to yield the next chunk (a state machine's
	// Persist under load) must not hold the tail of this one in the
	// buffer, where the receiver, waiting inside a frame, would time the
	// stream out (FrameTimeout) however soon the source resumed.
	write := func(body []byte) error {
		if err := c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
			return err
		}
		if err := writeFrameTo(bw, body); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
		return fail(err)
	}
	if _, err := bw.Write(mf); err != nil {
		return fail(err)
	}
	buf := make([]byte, t.cfg.SnapshotChunkSize)
	for sent := int64(0); sent < meta.Size; {
		n := int(min(int64(len(buf)), meta.Size-sent))
		k, err := io.ReadFull(r, buf[:n])
		if err != nil {
			return fail(fmt.Errorf("snapshot source ended after %d of %d bytes: %w", sent+int64(k), meta.Size, err))
		}
		if err := write(buf[:k]); err != nil {
			return fail(err)
		}
		sent += int64(k)
		select {
		case rerr := <-result:
			// The receiver gave up before the end (it is draining what we
			// send): stop rather than stream the rest for nothing.
			if rerr == nil {
				rerr = errors.New("receiver finished before the end of the stream")
			}
			return fmt.Errorf("transport: send snapshot to %v after %d of %d bytes: %w", to, sent, meta.Size, rerr)
		default:
		}
	}
	var one [1]byte
	if _, err := io.ReadFull(r, one[:]); err == nil {
		return fail(fmt.Errorf("snapshot source holds more than the %d bytes its meta declares", meta.Size))
	} else if !errors.Is(err, io.EOF) {
		return fail(fmt.Errorf("snapshot source: %w", err))
	}
	if err := write(nil); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	select {
	case err := <-result:
		if err != nil {
			return fmt.Errorf("transport: send snapshot to %v: %w", to, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("transport: send snapshot to %v: waiting for the result: %w", to, context.Cause(ctx))
	}
}

// receiveSnapshot hands a snapshot stream to the runtime and holds the
// connection until it calls Finish.
func (t *TCP) receiveSnapshot(ic *inConn) error {
	body, err := ic.fr.next()
	if err != nil {
		return fmt.Errorf("reading snapshot meta: %w", err)
	}
	meta, err := decodeSnapshotHeader(body)
	if err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	sr := &snapshotReader{fr: ic.fr, from: ic.from, size: meta.Size, left: meta.Size}
	finished := make(chan error, 1)
	finish := func(installErr error) error {
		res := snapshotResult{}
		if installErr == nil && !sr.done {
			installErr = fmt.Errorf("receiver finished after reading %d of %d bytes", meta.Size-sr.left, meta.Size)
		}
		if installErr != nil {
			res.Err = truncateReason(installErr.Error())
		}
		f, err := encodeFrame("snapshot result", &res, maxHandshakeFrame)
		if err == nil {
			if err = ic.c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err == nil {
				_, err = ic.c.Write(f)
			}
		}
		if err != nil {
			err = fmt.Errorf("transport: reporting snapshot result to %v: %w", ic.from, err)
		}
		finished <- installErr
		return err
	}
	s := wire.NewIncomingSnapshot(ic.from, meta, sr, finish, ic.dc.abort)
	busy := time.NewTimer(t.cfg.HandshakeTimeout)
	defer busy.Stop()
	select {
	case t.snaps <- s:
	case <-t.closing:
		return nil
	case <-busy.C:
		// Nobody is taking snapshots: tell the sender instead of leaving it
		// waiting until its context ends.
		s.Finish(errors.New("receiver busy: no one took the snapshot"))
		return errors.New("snapshot not taken by the runtime in time")
	}
	select {
	case err := <-finished:
		if err != nil {
			t.log.Info("snapshot refused", "peer", ic.from, "index", meta.LastIndex, "err", err)
		}
	case <-t.closing:
		return nil
	}
	if !sr.done && sr.err == nil {
		t.drain(ic)
	}
	return nil
}

// drain half-closes a refused snapshot stream and discards what the sender
// still sends until it hangs up (bounded by FrameTimeout). Closing outright
// with unread data would make the kernel reset the connection, and a reset
// can destroy the refusal before the sender reads it.
func (t *TCP) drain(ic *inConn) {
	if cw, ok := ic.c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	ic.dc.armed.Store(false)
	ic.c.SetReadDeadline(time.Now().Add(t.cfg.FrameTimeout))
	io.Copy(io.Discard, ic.br)
}

// snapshotReader reads the chunk frames of a snapshot stream.
type snapshotReader struct {
	fr    *frameReader
	from  edict.ProcessID
	size  int64
	left  int64  // bytes not yet returned
	chunk []byte // unread part of the current chunk
	done  bool   // end frame seen
	err   error
}

func (r *snapshotReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(r.chunk) == 0 {
		if r.done {
			return 0, io.EOF
		}
		body, err := r.fr.next()
		if err != nil {
			return 0, r.fail(err)
		}
		switch {
		case len(body) == 0 && r.left == 0:
			r.done = true
			return 0, io.EOF
		case len(body) == 0:
			return 0, r.fail(errors.New("empty chunk before the end of the stream"))
		case int64(len(body)) > r.left:
			return 0, r.fail(fmt.Errorf("stream longer than the %d bytes declared", r.size))
		}
		r.chunk = body
	}
	n := copy(p, r.chunk)
	r.chunk = r.chunk[n:]
	r.left -= int64(n)
	return n, nil
}

func (r *snapshotReader) fail(err error) error {
	r.err = fmt.Errorf("transport: snapshot from %v cut short after %d of %d bytes: %w", r.from, r.size-r.left, r.size, unexpected(err))
	return r.err
}
