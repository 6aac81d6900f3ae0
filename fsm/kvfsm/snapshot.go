package kvfsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/edictlog/edictlog/fsm"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// KV snapshot format, version 1:
//
//	version  1 byte: SnapshotVersion
//	header   frame: msgpack snapHeader (revision, key count)
//	records  count frames: msgpack KeyValue, keys strictly increasing
//	trailer  4 bytes: big-endian CRC-32C of every byte before it
//
// A frame is a 4-byte big-endian length and that many bytes of msgpack.
// Frames let Restore bound a record before reading it and decode it from
// memory with trailing bytes refused, and they make the checksum cover
// exactly the bytes before the trailer (a streaming msgpack decoder would
// read ahead into it). CRC-32C is hardware-accelerated and ample for
// detecting torn or flipped bytes; the snapshot store keeps its own digest
// of the file.

// SnapshotVersion is the first byte of a KV snapshot.
const SnapshotVersion byte = 1

// maxFrame bounds a snapshot record: a key, a value (no larger than the
// command that wrote it) and metadata, of which a stamp with a QT of
// edict.MaxQTSize readings is the largest part (about 10 KiB).
const maxFrame = MaxKeySize + MaxCommandSize + 64<<10

// ErrCorruptSnapshot is wrapped by Restore's errors about snapshot data that
// is truncated, fails its checksum or does not decode or validate.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapHeader struct {
	Revision uint64 `codec:"r"`
	Count    uint64 `codec:"n"`
}

// fsm.Snapshot captures the state in O(1): a copy-on-write clone of the B-tree
// (the cached read view, if one is current). Persist iterates the clone
// while Apply goes on writing the original, which copies the nodes it
// touches instead of modifying shared ones.
func (kv *KV) Snapshot() (fsm.Snapshot, error) {
	return &kvSnapshot{v: kv.view()}, nil
}

type kvSnapshot struct{ v *view }

// Persist writes the snapshot. It may be called concurrently with Apply and
// with reads of the KV, not with Release.
func (s *kvSnapshot) Persist(w io.Writer) error {
	if s.v == nil {
		return errors.New("fsm: persist KV snapshot: already released")
	}
	if err := s.persist(w); err != nil {
		return fmt.Errorf("fsm: persist KV snapshot at revision %d: %w", s.v.rev, err)
	}
	return nil
}

func (s *kvSnapshot) persist(w io.Writer) error {
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 64<<10)
	fw := frameWriter{w: bw}
	fw.enc = codec.NewEncoderBytes(&fw.body, mh)
	if err := bw.WriteByte(SnapshotVersion); err != nil {
		return err
	}
	if err := fw.frame(&snapHeader{Revision: s.v.rev, Count: uint64(s.v.tree.Len())}); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	var err error
	s.v.tree.Ascend(func(it item) bool {
		if err = fw.frame(it.kv); err != nil {
			err = fmt.Errorf("key %q: %w", it.key, err)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// The trailer bypasses the checksum it carries.
	_, err = w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Release drops the captured state; the nodes it alone kept become garbage.
func (s *kvSnapshot) Release() { s.v = nil }

type frameWriter struct {
	w    *bufio.Writer
	enc  *codec.Encoder
	body []byte
}

func (f *frameWriter) frame(v any) error {
	f.body = f.body[:0]
	f.enc.ResetBytes(&f.body)
	if err := f.enc.Encode(v); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if len(f.body) > maxFrame {
		return fmt.Errorf("record of %d bytes exceeds the limit of %d", len(f.body), maxFrame)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(f.body)))
	if _, err := f.w.Write(n[:]); err != nil {
		return err
	}
	_, err := f.w.Write(f.body)
	return err
}

// Restore replaces the state with a snapshot written by Persist. It decodes
// the stream record by record into a new tree and swaps it in only after
// the checksum has matched and the stream has ended, so on any error the
// old state is untouched. Readers see the old state or the new one.
func (kv *KV) Restore(r io.Reader) error {
	v, err := readSnapshot(r)
	if err != nil {
		return fmt.Errorf("fsm: restore KV snapshot: %w", err)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.tree, kv.rev, kv.frozen = v.tree, v.rev, nil
	return nil
}
