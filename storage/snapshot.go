package storage

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// idPattern is the form of snapshot IDs: index, creation time and a random
// tag in hex, so that byte order is (index, time) order and IDs cannot name
// a path outside the store.
var idPattern = regexp.MustCompile(`^[0-9a-f]{16}-[0-9a-f]{16}-[0-9a-f]{8}$`)

func newSnapshotID(index uint64, created time.Time) string {
	return fmt.Sprintf("%016x-%016x-%08x", index, uint64(created.UnixNano()), rand.Uint32())
}

func checkSnapshotMeta(m *wire.SnapshotMeta) error {
	if err := m.Reign.WellFormed(); err != nil {
		return fmt.Errorf("%w: snapshot reign: %v", ErrInvalid, err)
	}
	if err := m.Stamp.WellFormed(); err != nil {
		return fmt.Errorf("%w: snapshot stamp: %v", ErrInvalid, err)
	}
	if err := m.Config.Check(); err != nil {
		return fmt.Errorf("%w: snapshot configuration: %v", ErrInvalid, err)
	}
	if err := wire.CheckAddrs(m.Addrs, m.Config.Members, m.Config.Learners); err != nil {
		return fmt.Errorf("%w: snapshot %v", ErrInvalid, err)
	}
	return nil
}

// sortSnapshots orders newest first: by index, then creation, then ID.
func sortSnapshots(ms []wire.SnapshotMeta) {
	slices.SortFunc(ms, func(a, b wire.SnapshotMeta) int {
		switch {
		case a.Index != b.Index:
			if a.Index > b.Index {
				return -1
			}
			return 1
		case !a.Created.Equal(b.Created):
			return b.Created.Compare(a.Created)
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// cloneMeta copies m's slices, so that stores neither keep nor hand out
// memory a caller may change.
func cloneMeta(m wire.SnapshotMeta) wire.SnapshotMeta {
	m.SHA256 = bytes.Clone(m.SHA256)
	m.Config.Members = slices.Clone(m.Config.Members)
	m.Config.Learners = slices.Clone(m.Config.Learners)
	m.Reign.QT = slices.Clone(m.Reign.QT)
	m.Stamp.QT = slices.Clone(m.Stamp.QT)
	m.Addrs = maps.Clone(m.Addrs)
	return m
}

// snapMetaRecord is the stored form of SnapshotMeta.
type snapMetaRecord struct {
	ID      string           `codec:"id"`
	Index   uint64           `codec:"i"`
	Reign   edict.Stamp      `codec:"r"`
	Stamp   edict.Stamp      `codec:"s"`
	Config  wire.EpochConfig `codec:"c"`
	Size    int64            `codec:"n"`
	SHA256  []byte           `codec:"h"`
	Created int64            `codec:"t"`
	// Addrs in process order, left out when there are none: metadata
	// written before snapshots carried addresses has no such key.
	Addrs []snapAddr `codec:"a,omitempty"`
}

type snapAddr struct {
	P edict.ProcessID `codec:"p"`
	A string          `codec:"a"`
}

var snapMetaKey = []byte("snapshot-meta")

// encodeSnapMeta returns the record, version byte first, with a CRC-32C.
func encodeSnapMeta(m wire.SnapshotMeta) ([]byte, error) {
	r := snapMetaRecord{
		ID: m.ID, Index: m.Index, Reign: m.Reign, Stamp: m.Stamp, Config: m.Config,
		Size: m.Size, SHA256: m.SHA256, Created: m.Created.UnixNano(),
	}
	for _, p := range slices.Sorted(maps.Keys(m.Addrs)) {
		r.Addrs = append(r.Addrs, snapAddr{P: p, A: m.Addrs[p]})
	}
	rec, err := encodeRecord(wire.RecordVersion, r)
	if err != nil {
		return nil, err
	}
	return frame(nil, snapMetaKey, rec), nil
}

// decodeSnapMeta decodes and checks a metadata record; the error says what
// is wrong, the caller adds the file.
func decodeSnapMeta(b []byte) (wire.SnapshotMeta, error) {
	p, _, err := unframe(snapMetaKey, b)
	if err != nil {
		return wire.SnapshotMeta{}, err
	}
	var r snapMetaRecord
	if err := decodeRecord("snapshot metadata", wire.RecordVersion, wire.MaxRecordSize, p, &r); err != nil {
		return wire.SnapshotMeta{}, err
	}
	m := wire.SnapshotMeta{
		ID: r.ID, Index: r.Index, Reign: r.Reign, Stamp: r.Stamp, Config: r.Config,
		Size: r.Size, SHA256: r.SHA256, Created: time.Unix(0, r.Created),
	}
	if len(r.Addrs) > 0 {
		m.Addrs = make(map[edict.ProcessID]string, len(r.Addrs))
		for _, a := range r.Addrs {
			if _, dup := m.Addrs[a.P]; dup {
				return wire.SnapshotMeta{}, fmt.Errorf("address of %v listed twice", a.P)
			}
			m.Addrs[a.P] = a.A
		}
	}
	if err := checkSnapshotMeta(&m); err != nil {
		return wire.SnapshotMeta{}, err
	}
	if !idPattern.MatchString(m.ID) || m.Size < 0 || len(m.SHA256) != sha256.Size {
		return wire.SnapshotMeta{}, fmt.Errorf("impossible id %q, size %d or digest length %d", m.ID, m.Size, len(m.SHA256))
	}
	return m, nil
}

// verifyingReader passes through exactly size bytes of r and checks their
// SHA-256 before it reports io.EOF.
type verifyingReader struct {
	r      io.Reader
	closer io.Closer
	name   string // the file, for errors
	left   int64
	h      hash.Hash
	want   []byte
	err    error
}

func newVerifyingReader(r io.Reader, c io.Closer, name string, m wire.SnapshotMeta) *verifyingReader {
	return &verifyingReader{r: r, closer: c, name: name, left: m.Size, h: sha256.New(), want: m.SHA256}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.left == 0 {
		v.err = v.finish()
		return 0, v.err
	}
	if int64(len(p)) > v.left {
		p = p[:v.left]
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.left -= int64(n)
	switch {
	case err == io.EOF && v.left > 0:
		v.err = corruptf(v.name, "snapshot data ends %d bytes early", v.left)
		return n, v.err
	case err != nil && err != io.EOF:
		v.err = fmt.Errorf("storage: %s: read snapshot: %w", v.name, err)
		return n, v.err
	}
	return n, nil
}

// finish checks the digest once all bytes are read, and that the data does
// not go on past its recorded size.
func (v *verifyingReader) finish() error {
	var one [1]byte
	if n, _ := io.ReadFull(v.r, one[:]); n > 0 {
		return corruptf(v.name, "snapshot data is longer than its recorded size")
	}
	if got := v.h.Sum(nil); !bytes.Equal(got, v.want) {
		return corruptf(v.name, "snapshot SHA-256 is %x, want %x", got, v.want)
	}
	return io.EOF
}

func (v *verifyingReader) Close() error {
	if v.closer == nil {
		return nil
	}
	err := v.closer.Close()
	v.closer = nil
	return err
}
