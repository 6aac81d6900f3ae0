package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/edictlog/edictlog/wire"
)

// OpenWAL opens the store in the folder dir, creating the folder and an
// empty store if there is none. It reads and checks every record (see
// WALStore); damage is an error wrapping ErrCorrupt that names the file
// and the offset.
func OpenWAL(dir string, opts *WALOptions) (*WALStore, error) {
	var o WALOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
		// The folder's own entry must be durable before anything in it
		// is acknowledged.
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("storage: %s: sync the folder holding it: %w", dir, err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, walLockName), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := lockExclusive(lock, o.Timeout); err != nil {
		lock.Close()
		return nil, fmt.Errorf("storage: %s: %w (is another process using the store?)", dir, err)
	}
	s := &WALStore{dir: dir, opts: o, lock: lock}
	if err := s.load(); err != nil {
		for _, seg := range s.segments {
			seg.f.Close()
		}
		unlock(lock)
		lock.Close()
		return nil, err
	}
	return s, nil
}

// load reads the folder into s, creating the first segment of a new store.
func (s *WALStore) load() error {
	if err := os.Remove(filepath.Join(s.dir, walTempName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage: %w", err)
	}
	seqs, err := walSegments(s.dir)
	if err != nil {
		return err
	}
	if len(seqs) == 0 {
		return s.create()
	}
	for i, seq := range seqs {
		if i > 0 && seq != seqs[i-1]+1 {
			return corruptf(s.dir, "segment %d is missing (found %d and %d)", seqs[i-1]+1, seqs[i-1], seq)
		}
	}
	for i, seq := range seqs {
		if err := s.replay(seq, i == 0, i == len(seqs)-1); err != nil {
			return err
		}
	}
	for j, l := range s.locs {
		if l.seg == nil {
			return corruptf(s.dir, "entry %d is in no segment (the log holds %d to %d from segment %d on)", s.b.first+uint64(j), s.b.first, s.b.last, seqs[0])
		}
	}
	s.b.lastStamp = s.b.base
	if s.b.count() > 0 {
		e, err := s.readEntry(s.b.last)
		if err != nil {
			return err
		}
		s.b.lastStamp = e.Stamp
	}
	return nil
}

// walSegments lists the segment numbers in dir, in order.
func walSegments(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	var seqs []uint64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), walSuffix)
		if !ok || len(name) != 16 {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil || seq == 0 {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// create starts a new store: a random salt and segment 1 with an empty
// checkpoint.
func (s *WALStore) create() error {
	if _, err := rand.Read(s.salt[:]); err != nil {
		return fmt.Errorf("storage: salt: %w", err)
	}
	s.b = newBounds()
	s.stable = map[string][]byte{}
	cp, err := s.checkpointFrame(nil, 1, s.opts.SegmentSize)
	if err != nil {
		return err
	}
	seg, err := s.createSegment(1, s.opts.SegmentSize, cp)
	if err != nil {
		return err
	}
	s.segments = []*walSegment{seg}
	s.tail = int64(len(cp))
	return nil
}

// frameAt returns the body of the frame at off, if one that verifies is
// there, and its size; otherwise why not. salt nil means a checkpoint,
// which carries the salt in its body.
func frameAt(data []byte, off int64, salt []byte, seq uint64) (body []byte, size int64, why string) {
	if int64(len(data))-off < walFrameHeader {
		return nil, 0, "no room for a record header"
	}
	n := int64(binary.BigEndian.Uint32(data[off:]))
	stored := binary.BigEndian.Uint32(data[off+4:])
	if n == 0 {
		return nil, 0, "zero length"
	}
	size = walFrameSize(int(n))
	if size > int64(len(data))-off {
		return nil, 0, fmt.Sprintf("length %d runs past the end of the segment", n)
	}
	body = data[off+walFrameHeader : off+walFrameHeader+n]
	if salt == nil {
		if n < 2+walSaltSize {
			return nil, 0, "checkpoint too short for its salt"
		}
		salt = body[2 : 2+walSaltSize]
	}
	if c := walCRC(salt, seq, off, body); c != stored {
		return nil, 0, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", stored, c)
	}
	return body, size, ""
}

// replay applies segment seq's records to s.
func (s *WALStore) replay(seq uint64, oldest, newest bool) error {
	path := s.segmentPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	seg := &walSegment{seq: seq, path: path, f: f}
	s.segments = append(s.segments, seg)
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	seg.size = fi.Size()
	data, unmap, err := mapFile(f, seg.size)
	if err != nil {
		return fmt.Errorf("storage: %s: %w", path, err)
	}
	defer unmap()
	body, off, why := frameAt(data, 0, nil, seq)
	if why != "" {
		return corruptf(path, "checkpoint: %s", why)
	}
	cp, err := decodeWALRecord(body)
	switch {
	case err != nil:
		return corruptf(path, "checkpoint: %v", err)
	case cp.kind != walCheckpoint:
		return corruptf(path, "first record is of kind %d, not a checkpoint", cp.kind)
	case cp.segment != seq:
		return corruptf(path, "checkpoint names segment %d", cp.segment)
	case cp.size != seg.size:
		return corruptf(path, "segment is %d bytes, its checkpoint says %d (truncated?)", seg.size, cp.size)
	}
	if oldest {
		s.salt = cp.salt
		s.b = bounds{first: cp.first, last: cp.last, base: cp.base}
		s.locs = make([]walLoc, cp.count())
		s.stable = cp.stable
	} else if why := s.differs(&cp); why != "" {
		return corruptf(path, "checkpoint differs from the state the segments before it leave: %s", why)
	}
	for {
		body, size, why := frameAt(data, off, s.salt[:], seq)
		if why != "" {
			return s.endOfSegment(seg, data, off, why, newest)
		}
		rec, err := decodeWALRecord(body)
		if err != nil {
			return corruptf(path, "record at offset %d: %v", off, err)
		}
		if err := s.apply(&rec, seg, off+walFrameHeader); err != nil {
			return corruptf(path, "record at offset %d: %v", off, err)
		}
		off += size
	}
}

func (r *walRecord) count() uint64 { return r.last + 1 - r.first }

// differs says how checkpoint cp differs from the state s holds, or "".
func (s *WALStore) differs(cp *walRecord) string {
	switch {
	case cp.salt != s.salt:
		return "another store's salt"
	case cp.first != s.b.first || cp.last != s.b.last:
		return fmt.Sprintf("log %d to %d, want %d to %d", cp.first, cp.last, s.b.first, s.b.last)
	case !cp.base.Equal(s.b.base):
		return "base stamp"
	case !maps.EqualFunc(cp.stable, s.stable, bytes.Equal):
		return "stable keys"
	}
	return ""
}

// The two checks that tell a write cut short from damage, each turned off
// by TestWALNegativeControls alone to show that the tests see it; always
// on otherwise.
var (
	// clearTornTail: a record that fails at the end of the newest
	// segment, nothing verifying after it, is a crash's, and cleared.
	clearTornTail = true
	// scanPastFailure: a failed record with one that verifies after it
	// is damage, however it looks.
	scanPastFailure = true
)

// endOfSegment decides what the bytes from off on, where no record
// verifies, are: the unused zeros of a segment, the record a crash cut
// short at the end of the newest one (cleared), or damage.
func (s *WALStore) endOfSegment(seg *walSegment, data []byte, off int64, why string, newest bool) error {
	path := seg.path
	end := lastNonZero(data[off:])
	if end == 0 {
		if newest {
			s.tail = off
		}
		return nil
	}
	if !newest {
		return corruptf(path, "record at offset %d: %s, in a segment before the newest", off, why)
	}
	if !clearTornTail {
		return corruptf(path, "record at offset %d: %s", off, why)
	}
	for o := off + walAlign; scanPastFailure && o+walFrameHeader <= int64(len(data)); o += walAlign {
		// Only a batch or compaction record can follow a checkpoint; the
		// test keeps the CRC for plausible places.
		if binary.BigEndian.Uint64(data[o:]) == 0 || o+walFrameHeader+2 > int64(len(data)) ||
			data[o+walFrameHeader] != walVersion || (data[o+walFrameHeader+1] != walBatch && data[o+walFrameHeader+1] != walCompact) {
			continue
		}
		if _, _, w := frameAt(data, o, s.salt[:], seg.seq); w == "" {
			return corruptf(path, "record at offset %d: %s, and the record at offset %d after it verifies", off, why, o)
		}
	}
	// Only the last write, cut short by a crash, can be here: clear it, so
	// that the records written after it are followed by zeros again.
	if _, err := seg.f.WriteAt(make([]byte, end), off); err != nil {
		return fmt.Errorf("storage: %s: clear a record cut short: %w", path, err)
	}
	if err := fdatasync(seg.f); err != nil {
		return fmt.Errorf("storage: %s: clear a record cut short: %w", path, err)
	}
	s.opts.Logger.Warn("storage: cleared the end of a write a crash cut short (it was never acknowledged)",
		"path", path, "offset", off, "bytes", end, "why", why)
	s.tornBytes = int64(end)
	s.tail = off
	return nil
}

// lastNonZero returns the length of b up to its last non-zero byte.
func lastNonZero(b []byte) int {
	for len(b) > 0 {
		if n := len(b); n >= 8 && binary.NativeEndian.Uint64(b[n-8:]) == 0 {
			b = b[:n-8]
			continue
		}
		if b[len(b)-1] != 0 {
			return len(b)
		}
		b = b[:len(b)-1]
	}
	return 0
}

// apply applies a record read at start-up; bodyOff is where its body is in
// seg. It refuses what the store could not have written.
func (s *WALStore) apply(rec *walRecord, seg *walSegment, bodyOff int64) error {
	switch rec.kind {
	case walCheckpoint:
		return errors.New("a checkpoint past the start of the segment")
	case walCompact:
		if rec.upTo < s.b.first || rec.upTo > s.b.last {
			return fmt.Errorf("compaction up to %d, outside the log %d to %d", rec.upTo, s.b.first, s.b.last)
		}
		s.locs = s.locs[rec.upTo+1-s.b.first:]
		s.b.first, s.b.base = rec.upTo+1, rec.base
		return nil
	case walBatch:
	default:
		return fmt.Errorf("unknown record kind %d", rec.kind)
	}
	if rec.reset != nil {
		if rec.truncateFrom != 0 || rec.reset.Index == ^uint64(0) {
			return errors.New("a reset the store refuses")
		}
		s.b = bounds{first: rec.reset.Index + 1, last: rec.reset.Index, base: rec.reset.Stamp}
		s.locs = nil
	}
	if t := rec.truncateFrom; t != 0 {
		if t < s.b.first || t > s.b.last+1 {
			return fmt.Errorf("truncation from %d, outside the log %d to %d", t, s.b.first, s.b.last)
		}
		s.locs = s.locs[:t-s.b.first]
		s.b.last = t - 1
	}
	for _, e := range rec.entries {
		if e.index != s.b.last+1 {
			return fmt.Errorf("entry %d follows entry %d", e.index, s.b.last)
		}
		s.locs = append(s.locs, walLoc{seg: seg, off: bodyOff + int64(e.off), n: uint32(e.len)})
		s.b.last = e.index
	}
	for k, v := range rec.set {
		s.stable[k] = v
	}
	for _, k := range rec.del {
		delete(s.stable, k)
	}
	return nil
}

// checkpointFrame appends to dst the checkpoint frame that starts segment
// seq of the given size, from the state s holds.
func (s *WALStore) checkpointFrame(dst []byte, seq uint64, size int64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, walFrameHeader)...)
	dst, err := appendCheckpoint(dst, s.salt[:], seq, size, s.b, s.stable)
	if err != nil {
		return nil, s.errf(err, "checkpoint")
	}
	return sealFrame(dst, start, s.salt[:], seq, 0), nil
}

// createSegment creates segment seq at size bytes, allocated and zero,
// holding content at its start, durably: written under a temporary name,
// synced, renamed into place and the folder synced.
func (s *WALStore) createSegment(seq uint64, size int64, content []byte) (*walSegment, error) {
	tmp := filepath.Join(s.dir, walTempName)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	fail := func(err error) (*walSegment, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("storage: %s: new segment %d: %w", s.dir, seq, err)
	}
	if err := allocate(f, size); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	path := s.segmentPath(seq)
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(s.dir); err != nil {
		// The segment may or may not be in the folder after a crash: the
		// store cannot say which state is durable.
		f.Close()
		return nil, fmt.Errorf("storage: %s: new segment %d: sync folder: %w", s.dir, seq, err)
	}
	return &walSegment{seq: seq, path: path, f: f, size: size}, nil
}

// allocate makes f size bytes long with every block allocated, so that
// writing into it later allocates nothing and an fdatasync after a write
// has no metadata to commit: fallocate where the filesystem has it, else
// zeros written. A full disk is an error either way.
func allocate(f *os.File, size int64) error {
	if err := fallocate(f, size); !errors.Is(err, errors.ErrUnsupported) {
		return err // nil, or a real failure such as a full disk
	}
	for off := int64(0); off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("zero-fill at %d: %w", off, err)
		}
		off += n
	}
	return nil
}

// readEntry reads entry i, which s.locs holds, and checks it.
func (s *WALStore) readEntry(i uint64) (wire.Entry, error) {
	l := s.locs[i-s.b.first]
	name := l.seg.path
	buf := make([]byte, int(l.n)+4)
	if _, err := l.seg.f.ReadAt(buf, l.off); err != nil {
		return wire.Entry{}, fmt.Errorf("storage: %s: entry %d at offset %d: %w", name, i, l.off, err)
	}
	enc := buf[:l.n]
	if stored, c := binary.BigEndian.Uint32(buf[l.n:]), entryCRC(i, enc); stored != c {
		return wire.Entry{}, corruptf(name, "entry %d at offset %d: checksum mismatch (stored %08x, computed %08x)", i, l.off, stored, c)
	}
	e, err := wire.DecodeEntry(enc)
	switch {
	case err != nil:
		return e, corruptf(name, "entry %d at offset %d: %v", i, l.off, err)
	case e.Index != i:
		return e, corruptf(name, "entry %d at offset %d holds index %d", i, l.off, e.Index)
	}
	return e, nil
}
