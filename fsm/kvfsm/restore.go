package kvfsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// snapReader reads a snapshot stream, hashing every byte before the
// trailer and counting bytes so that errors can name an offset.
type snapReader struct {
	src *bufio.Reader
	crc hash.Hash32
	off int64
	buf bytes.Buffer
	dec *codec.Decoder
	// rec and count say which record is being read (0: the header), for
	// error messages.
	rec, count uint64
}

func (s *snapReader) what() string {
	if s.rec == 0 {
		return "header"
	}
	return fmt.Sprintf("record %d of %d", s.rec, s.count)
}

// corrupt describes what is wrong at the current offset.
func (s *snapReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrCorruptSnapshot, s.off, fmt.Sprintf(format, args...))
}

// readErr turns a read error into a clear one: running out of input is
// corruption (truncation); anything else is the source's own error, such as
// a snapshot store reporting a digest mismatch, and is wrapped as is.
func (s *snapReader) readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.corrupt("truncated in %s", what)
	}
	return fmt.Errorf("reading %s at offset %d: %w", what, s.off, err)
}

// read fills p from the source, hashing it.
func (s *snapReader) read(what string, p []byte) error {
	n, err := io.ReadFull(s.src, p)
	s.crc.Write(p[:n])
	s.off += int64(n)
	if err != nil {
		return s.readErr(what, err)
	}
	return nil
}

// frame reads one length-prefixed record into s.buf and decodes it into v.
// The buffer grows only as bytes actually arrive, so a corrupt length
// cannot make Restore allocate more than the stream holds.
func (s *snapReader) frame(v any) error {
	var n [4]byte
	if err := s.read(s.what()+" length", n[:]); err != nil {
		return err
	}
	what := s.what()
	size := binary.BigEndian.Uint32(n[:])
	switch {
	case size == 0:
		return s.corrupt("%s: empty record", what)
	case size > maxFrame:
		return s.corrupt("%s: record of %d bytes exceeds the limit of %d", what, size, maxFrame)
	}
	s.buf.Reset()
	got, err := io.CopyN(&s.buf, s.src, int64(size))
	s.crc.Write(s.buf.Bytes())
	s.off += got
	if err != nil {
		return s.readErr(what, err)
	}
	start := s.off - int64(size)
	s.dec.ResetBytes(s.buf.Bytes())
	if err := s.dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s at offset %d: %w", ErrCorruptSnapshot, what, start, err)
	}
	if used := s.dec.NumBytesRead(); used != int(size) {
		return fmt.Errorf("%w: %s at offset %d: %d trailing bytes in record", ErrCorruptSnapshot, what, start, int(size)-used)
	}
	return nil
}

// readSnapshot decodes a whole snapshot into a new tree.
func readSnapshot(r io.Reader) (*view, error) {
	s := &snapReader{
		src: bufio.NewReaderSize(r, 64<<10),
		crc: crc32.New(castagnoli),
		dec: codec.NewDecoderBytes(nil, mh),
	}
	var version [1]byte
	if err := s.read("version byte", version[:]); err != nil {
		return nil, err
	}
	if version[0] != SnapshotVersion {
		return nil, s.corrupt("unknown version byte %d (want %d)", version[0], SnapshotVersion)
	}
	var h snapHeader
	if err := s.frame(&h); err != nil {
		return nil, err
	}
	if h.Count > 0 && h.Revision == 0 {
		return nil, s.corrupt("header: %d keys at revision 0", h.Count)
	}
	tree := newTree()
	var prev string
	s.count = h.Count
	for s.rec = 1; s.rec <= h.Count; s.rec++ {
		kv := new(KeyValue)
		if err := s.frame(kv); err != nil {
			return nil, err
		}
		if err := checkRecord(kv, h.Revision); err != nil {
			return nil, s.corrupt("%s: %v", s.what(), err)
		}
		if s.rec > 1 && kv.Key <= prev {
			return nil, s.corrupt("%s: key %q does not follow %q", s.what(), kv.Key, prev)
		}
		prev = kv.Key
		// Keys arrive in order, so each insert descends the right edge.
		tree.ReplaceOrInsert(item{key: kv.Key, kv: kv})
	}
	sum := s.crc.Sum32()
	var trailer [4]byte
	n, err := io.ReadFull(s.src, trailer[:])
	s.off += int64(n)
	if err != nil {
		return nil, s.readErr("checksum trailer", err)
	}
	if want := binary.BigEndian.Uint32(trailer[:]); want != sum {
		return nil, s.corrupt("checksum mismatch: trailer says CRC-32C %08x, data has %08x", want, sum)
	}
	// Read to io.EOF: a snapshot store verifies its digest only there, and
	// extra bytes mean the stream is not what Persist wrote.
	switch _, err := s.src.ReadByte(); {
	case err == nil:
		return nil, s.corrupt("trailing bytes after the checksum trailer")
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("reading end of stream at offset %d: %w", s.off, err)
	}
	return &view{tree: tree, rev: h.Revision}, nil
}

// checkRecord checks a record against the invariants Apply keeps, so that
// a restored state is one Apply could have produced.
func checkRecord(kv *KeyValue, rev uint64) error {
	if err := checkKey(kv.Key); err != nil {
		return err
	}
	switch {
	case kv.CreateRevision == 0:
		return fmt.Errorf("key %q: create revision 0", kv.Key)
	case kv.ModRevision < kv.CreateRevision:
		return fmt.Errorf("key %q: mod revision %d before create revision %d", kv.Key, kv.ModRevision, kv.CreateRevision)
	case kv.ModRevision > rev:
		return fmt.Errorf("key %q: mod revision %d after the snapshot's revision %d", kv.Key, kv.ModRevision, rev)
	case kv.Version == 0 || kv.Version > kv.ModRevision-kv.CreateRevision+1:
		// Each write of a key is a distinct entry, so a key cannot have
		// more versions than entries since its creation.
		return fmt.Errorf("key %q: version %d impossible between revisions %d and %d",
			kv.Key, kv.Version, kv.CreateRevision, kv.ModRevision)
	}
	if err := kv.Stamp.WellFormed(); err != nil {
		return fmt.Errorf("key %q: %w", kv.Key, err)
	}
	return nil
}
