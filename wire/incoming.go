package wire

import (
	"io"
	"sync"

	"github.com/edictlog/edictlog/edict"
)

// IncomingSnapshot is a snapshot stream from a peer. Read yields exactly
// Header.Size bytes, then io.EOF; a stream cut short yields an error
// instead, never a short snapshot that looks whole.
type IncomingSnapshot struct {
	From   edict.ProcessID
	Header SnapshotHeader

	r      io.Reader
	finish func(installErr error) error
	abort  func()
	once   sync.Once
	err    error
}

// NewIncomingSnapshot is how a transport hands a received stream to the
// log: r yields the stream, finish tells the sender the outcome, and
// abort, if not nil, makes a Read blocked on r, and every later one,
// fail at once (Abort).
func NewIncomingSnapshot(from edict.ProcessID, header SnapshotHeader, r io.Reader, finish func(error) error, abort func()) *IncomingSnapshot {
	return &IncomingSnapshot{From: from, Header: header, r: r, finish: finish, abort: abort}
}

// Abort makes a Read blocked on the stream, and every later one, fail:
// a receiver that stops gives up on a stream whose sender has stalled
// rather than wait for the transport's timeouts. It tells the sender
// nothing; Finish does. Safe from any goroutine, and more than once.
func (s *IncomingSnapshot) Abort() {
	if s.abort != nil {
		s.abort()
	}
}

// Read reads the snapshot stream.
func (s *IncomingSnapshot) Read(p []byte) (int, error) { return s.r.Read(p) }

// Finish reports the outcome to the sender (nil: installed) and releases
// the stream. Only the first call counts; it returns the error, if any, of
// telling the sender.
func (s *IncomingSnapshot) Finish(installErr error) error {
	s.once.Do(func() { s.err = s.finish(installErr) })
	return s.err
}
