package storage

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// StoreBatch implements LogStore: one record, one pwrite, one fdatasync.
func (s *WALStore) StoreBatch(b wire.Batch) error {
	if b.Empty() {
		_, err := s.bounds()
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	next, err := plan(s.b, &b)
	if err != nil {
		return err
	}
	if b.TruncateFrom != 0 && len(b.Entries) == 0 && next.last >= next.first {
		e, err := s.readEntry(next.last)
		if err != nil {
			return err
		}
		next.lastStamp = e.Stamp
	}
	return s.storeBatch(&b, next)
}

// storeBatch writes b, which plan accepted with next as the result. The
// caller holds wmu.
func (s *WALStore) storeBatch(b *wire.Batch, next bounds) error {
	s.buf = append(s.buf[:0], make([]byte, walFrameHeader)...)
	var err error
	if s.buf, s.offs, err = appendBatch(s.buf, b, s.offs[:0]); err != nil {
		return err
	}
	defer s.trimBuffers()
	seg, frameOff, err := s.append()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if b.Reset != nil {
		s.locs = nil
	}
	if b.TruncateFrom != 0 {
		s.locs = s.locs[:b.TruncateFrom-s.b.first]
	}
	for i := 0; i < len(s.offs); i += 2 {
		s.locs = append(s.locs, walLoc{seg: seg, off: frameOff + int64(s.offs[i]), n: uint32(s.offs[i+1])})
	}
	for k, v := range b.Stable {
		s.stable[k] = slices.Clone(v)
	}
	for _, k := range b.Delete {
		delete(s.stable, k)
	}
	s.b = next
	s.mu.Unlock()
	if b.Reset != nil {
		s.removeDeadOrWarn()
	}
	return nil
}

// append writes the record whose body is in s.buf (after a header's room)
// at the end of the newest segment, or starts a new segment for it, and
// makes it durable. It returns the segment and where the frame is in it.
// The caller holds wmu.
func (s *WALStore) append() (*walSegment, int64, error) {
	seg := s.segments[len(s.segments)-1]
	frame := walFrameSize(len(s.buf) - walFrameHeader)
	if s.tail+frame <= seg.size {
		off := s.tail
		s.buf = sealFrame(s.buf, 0, s.salt[:], seg.seq, off)
		start := time.Now()
		if _, err := seg.f.WriteAt(s.buf, off); err != nil {
			return nil, 0, s.fail(err, "write at offset %d of %s", off, seg.path)
		}
		if err := fdatasync(seg.f); err != nil {
			return nil, 0, s.fail(err, "sync %s", seg.path)
		}
		s.count(time.Since(start), off, int64(len(s.buf)))
		s.tail = off + int64(len(s.buf))
		return seg, off, nil
	}
	// A new segment, whose checkpoint holds the state before this record.
	seq := seg.seq + 1
	cp, err := s.checkpointFrame(nil, seq, 0)
	if err != nil {
		return nil, 0, err
	}
	size := max(s.opts.SegmentSize, int64(len(cp))+frame)
	if cp, err = s.checkpointFrame(nil, seq, size); err != nil {
		return nil, 0, err
	}
	off := int64(len(cp))
	s.buf = sealFrame(s.buf, 0, s.salt[:], seq, off)
	start := time.Now()
	next, err := s.createSegment(seq, size, append(cp, s.buf...))
	if err != nil {
		return nil, 0, s.fail(err, "new segment")
	}
	s.count(time.Since(start), 0, off+int64(len(s.buf)))
	s.mu.Lock()
	s.segments = append(s.segments, next)
	s.mu.Unlock()
	s.tail = off + int64(len(s.buf))
	return next, off, nil
}

// count records a durable write of n bytes at off that took d.
func (s *WALStore) count(d time.Duration, off, n int64) {
	s.fsyncs.Add(1)
	s.fsyncTime.Add(int64(d))
	if int64(d) > s.fsyncMax.Load() {
		s.fsyncMax.Store(int64(d)) // only writers store, under wmu
	}
	s.pageWrites.Add(uint64((off+n-1)/4096 - off/4096 + 1))
}

// fail refuses further writes: after a failed write or sync the file's
// contents are unknown (the kernel may have dropped the dirty pages).
// Reopening reads and checks them again.
func (s *WALStore) fail(err error, format string, args ...any) error {
	s.failed = fmt.Errorf("storage: %s: %s: %w; the store refuses further writes until reopened", s.dir, fmt.Sprintf(format, args...), err)
	return s.failed
}

// writable reports why the store cannot take a write; the caller holds wmu.
func (s *WALStore) writable() error {
	if _, err := s.bounds(); err != nil {
		return err
	}
	return s.failed
}

// trimBuffers drops buffers a huge batch grew, so one such batch does not
// pin its memory for the life of the store.
func (s *WALStore) trimBuffers() {
	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}
	if cap(s.offs) > 64<<10 {
		s.offs = nil
	}
}

// CompactPrefix implements LogStore: one record, after which the segments
// that hold only compacted entries are removed.
func (s *WALStore) CompactPrefix(upTo uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	cur := s.b
	if err := checkCompact(cur, upTo); err != nil {
		return err
	}
	if upTo < cur.first {
		return nil
	}
	e, err := s.readEntry(upTo)
	if err != nil {
		return err
	}
	s.buf = append(s.buf[:0], make([]byte, walFrameHeader)...)
	if s.buf, err = appendCompact(s.buf, upTo, e.Stamp); err != nil {
		return s.errf(err, "compact")
	}
	if _, _, err := s.append(); err != nil {
		return err
	}
	s.mu.Lock()
	// Copied when most of the slice would be dead weight.
	s.locs = s.locs[upTo+1-cur.first:]
	if cap(s.locs) > 2*len(s.locs)+1024 {
		s.locs = slices.Clone(s.locs)
	}
	s.b.first, s.b.base = upTo+1, e.Stamp
	s.mu.Unlock()
	s.removeDeadOrWarn()
	return nil
}

// removeDeadOrWarn removes the dead segments after a record that killed
// them is durable. That record stands whatever happens to the removal, so
// a failure is not the write's: it is logged, and the next compaction
// tries again (or, after a failed sync of the folder, the store refuses
// writes until reopened).
func (s *WALStore) removeDeadOrWarn() {
	if err := s.removeDead(); err != nil {
		s.opts.Logger.Warn("storage: segments holding only compacted entries are left on disk", "path", s.dir, "error", err)
	}
}

// removeDead removes the segments before the one that holds the first
// entry (or before the newest, when the log is empty), oldest first, each
// removal synced before the next. The caller holds wmu.
func (s *WALStore) removeDead() error {
	s.mu.Lock()
	live := s.segments[len(s.segments)-1]
	if len(s.locs) > 0 {
		live = s.locs[0].seg
	}
	var dead []*walSegment
	for len(s.segments) > 0 && s.segments[0] != live {
		dead = append(dead, s.segments[0])
		s.segments = s.segments[1:]
	}
	s.mu.Unlock()
	for i, seg := range dead {
		if err := os.Remove(seg.path); err != nil {
			// This one and the rest are still on disk, still open: back
			// in the list, for the next compaction to try again.
			s.mu.Lock()
			s.segments = append(slices.Clone(dead[i:]), s.segments...)
			s.mu.Unlock()
			return s.errf(err, "remove segment %d", seg.seq)
		}
		seg.f.Close()
		if err := syncDir(s.dir); err != nil {
			// Whether the removal is durable is unknown, and the next
			// one must not become durable before it: as after a failed
			// fdatasync, no more writes until the store is reopened.
			for _, rest := range dead[i+1:] {
				rest.f.Close()
			}
			return s.fail(err, "sync the folder after removing segment %d", seg.seq)
		}
	}
	return nil
}

// Set implements StableStore.
func (s *WALStore) Set(key string, value []byte) error {
	return s.StoreBatch(wire.Batch{Stable: map[string][]byte{key: value}})
}

// Delete implements StableStore.
func (s *WALStore) Delete(key string) error {
	return s.StoreBatch(wire.Batch{Delete: []string{key}})
}

// BumpIncarnation implements StableStore.
func (s *WALStore) BumpIncarnation() (uint64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return 0, err
	}
	var cur uint64
	if v, ok := s.stable[wire.KeyIncarnation]; ok {
		var err error
		if cur, err = wire.DecodeUint64(wire.KeyIncarnation, v); err != nil {
			return 0, fmt.Errorf("storage: %s: %w", s.dir, err)
		}
	}
	if cur+1 == 0 {
		return 0, fmt.Errorf("storage: %s: incarnation overflow", s.dir)
	}
	b := wire.Batch{Stable: map[string][]byte{wire.KeyIncarnation: wire.EncodeUint64(cur + 1)}}
	if err := s.storeBatch(&b, s.b); err != nil {
		return 0, err
	}
	return cur + 1, nil
}
