package replog

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrSnapshotUnread: the state machine's Restore returned without error,
// but the rest of the snapshot's stream, which it did not read, failed when
// the log read it — a snapshot store verifies its digest only at the end,
// so the state restored was read from a stream that did not check out.
var ErrSnapshotUnread = errors.New("edictlog: the snapshot failed its check after the state machine restored it")

// RestoreChecked has restore read a snapshot's stream and then reads
// whatever restore left of it to its end (io.EOF), since a snapshot store
// verifies the snapshot's digest only there: an FSM that stops reading
// early (its format tells it where the state ends) would otherwise be
// trusted with bytes no one checked. The stream is read through ctx: once
// ctx ends, reads fail with its error, and so does restore, which keeps
// the previous state (fsm.FSM).
//
// When the rest fails its check, the error wraps ErrSnapshotUnread and the
// check's error. The FSM then holds what it restored, which must not be
// used: the log does not take it up — Start fails, and a Node installing
// a snapshot from its leader stops (docs/architecture.md, "Embedding the
// library"). A DiskFSM's Restore is durable and cannot be taken back, so
// its snapshots are checked before it reads them (restoreFrom, and
// applier.restore): for one, this check finds nothing.
func RestoreChecked(ctx context.Context, restore func(io.Reader) error, r io.Reader) error {
	cr := &ctxReader{ctx: ctx, r: r}
	if err := restore(cr); err != nil {
		return err
	}
	if cr.eof {
		return nil
	}
	rest, err := io.Copy(io.Discard, cr)
	if err != nil {
		return fmt.Errorf("%w (the state machine left %d bytes or more unread): %w", ErrSnapshotUnread, rest, err)
	}
	return nil
}

// VerifySnapshot reads a snapshot's stream to its end, so that the store
// checks its digest, before a state machine whose Restore cannot be taken
// back reads it.
func VerifySnapshot(ctx context.Context, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, &ctxReader{ctx: ctx, r: rc}); err != nil {
		return fmt.Errorf("edictlog: check the snapshot before restoring it: %w", err)
	}
	return nil
}

// ctxReader reads r until ctx ends, and notes the end of the stream.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
	eof bool
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}
