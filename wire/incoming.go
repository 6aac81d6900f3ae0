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
	once   sync.Once
	err    error
}

// NewIncomingSnapshot is how a transport hands a received stream to the
// log: r yields the stream, finish tells the sender the outcome.
func NewIncomingSnapshot(from edict.ProcessID, header SnapshotHeader, r io.Reader, finish func(error) error) *IncomingSnapshot {
	return &IncomingSnapshot{From: from, Header: header, r: r, finish: finish}
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
