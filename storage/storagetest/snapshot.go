package storagetest

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// SnapshotHarness tells RunSnapshotStore how to get snapshot stores.
type SnapshotHarness struct {
	// Open returns the store kept in dir that retains retain snapshots.
	// Each subtest gets its own empty dir and may reopen it.
	Open func(t testing.TB, dir string, retain int) SnapshotStore
	// Durable says a store reopened on the same dir lists the same
	// snapshots.
	Durable bool
}

// RunSnapshotStore runs the snapshot store contract against h.
func RunSnapshotStore(t *testing.T, h SnapshotHarness) {
	tests := []struct {
		name string
		f    func(*testing.T, SnapshotHarness)
	}{
		{"CreateOpen", testSnapCreateOpen},
		{"Cancel", testSnapCancel},
		{"Order", testSnapOrder},
		{"Retain", testSnapRetain},
		{"NotFound", testSnapNotFound},
		{"Invalid", testSnapInvalid},
		{"Stream", testSnapStream},
		{"Reopen", testSnapReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

// SnapMeta returns snapshot metadata for index over processes 1..3 and
// learner 4, with the addresses of 2 and 4.
func SnapMeta(index uint64) wire.SnapshotMeta {
	return wire.SnapshotMeta{
		Index:  index,
		Reign:  Stamp(1, 1),
		Stamp:  Stamp(1, index),
		Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4}},
		Addrs:  map[edict.ProcessID]string{2: "10.0.0.2:7000", 4: "n4.example:7000"},
	}
}

// writeSnap creates and commits a snapshot of data, returning its ID.
func writeSnap(t *testing.T, s SnapshotStore, index uint64, data []byte) string {
	t.Helper()
	sink, err := s.Create(SnapMeta(index))
	require.NoError(t, err)
	_, err = sink.Write(data)
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	return sink.ID()
}

func readSnap(t *testing.T, s SnapshotStore, id string) (wire.SnapshotMeta, []byte) {
	t.Helper()
	m, r, err := s.Open(id)
	require.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return m, b
}

func testSnapCreateOpen(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 3)
	data := []byte("the state machine at index 42")
	sink, err := s.Create(SnapMeta(42))
	require.NoError(t, err)
	require.NotEmpty(t, sink.ID())
	_, err = sink.Write(data[:10])
	require.NoError(t, err)
	ms, err := s.List()
	require.NoError(t, err)
	require.Empty(t, ms, "a snapshot is invisible until Close")
	_, err = sink.Write(data[10:])
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	require.Error(t, sink.Close(), "Close twice")
	_, err = sink.Write([]byte("x"))
	require.Error(t, err, "Write after Close")

	ms, err = s.List()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	m := ms[0]
	want := SnapMeta(42)
	require.Equal(t, sink.ID(), m.ID)
	require.Equal(t, uint64(42), m.Index)
	require.True(t, want.Stamp.Equal(m.Stamp))
	require.True(t, want.Reign.Equal(m.Reign))
	require.Equal(t, want.Config, m.Config)
	require.Equal(t, want.Addrs, m.Addrs)
	require.Equal(t, int64(len(data)), m.Size)
	sum := sha256.Sum256(data)
	require.Equal(t, sum[:], m.SHA256)
	require.False(t, m.Created.IsZero())

	om, got := readSnap(t, s, m.ID)
	require.Equal(t, data, got)
	require.Equal(t, m.ID, om.ID)
	require.Equal(t, m.SHA256, om.SHA256)
	require.Equal(t, want.Addrs, om.Addrs)
	require.NoError(t, s.Verify(m.ID))

	// An empty snapshot is a snapshot.
	id := writeSnap(t, s, 43, nil)
	_, got = readSnap(t, s, id)
	require.Empty(t, got)
}

func testSnapCancel(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 3)
	sink, err := s.Create(SnapMeta(7))
	require.NoError(t, err)
	_, err = sink.Write([]byte("partial"))
	require.NoError(t, err)
	require.NoError(t, sink.Cancel())
	require.Error(t, sink.Close(), "Close after Cancel")
	_, err = sink.Write([]byte("x"))
	require.Error(t, err)
	ms, err := s.List()
	require.NoError(t, err)
	require.Empty(t, ms)
	_, _, err = s.Open(sink.ID())
	require.ErrorIs(t, err, wire.ErrNotFound)
}

func testSnapOrder(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 10)
	for _, idx := range []uint64{20, 5, 300, 20} {
		writeSnap(t, s, idx, []byte{byte(idx)})
	}
	ms, err := s.List()
	require.NoError(t, err)
	require.Len(t, ms, 4)
	var idxs []uint64
	for _, m := range ms {
		idxs = append(idxs, m.Index)
	}
	require.Equal(t, []uint64{300, 20, 20, 5}, idxs)
	require.True(t, ms[1].Created.After(ms[2].Created) || ms[1].ID > ms[2].ID, "of two snapshots at one index the later comes first")
}

func testSnapRetain(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 2)
	var ids []string
	for i := uint64(1); i <= 4; i++ {
		ids = append(ids, writeSnap(t, s, i*10, []byte{byte(i)}))
	}
	ms, err := s.List()
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, ids[3], ms[0].ID)
	require.Equal(t, ids[2], ms[1].ID)
	_, _, err = s.Open(ids[0])
	require.ErrorIs(t, err, wire.ErrNotFound)
	// A snapshot open for reading survives being retired.
	m, r, err := s.Open(ids[2])
	require.NoError(t, err)
	writeSnap(t, s, 50, []byte{5})
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, []byte{3}, b)
	require.Equal(t, uint64(30), m.Index)
}

func testSnapNotFound(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 2)
	for _, id := range []string{"", "nope", "../../etc/passwd", "0000000000000001-0000000000000001-00000001"} {
		_, _, err := s.Open(id)
		require.ErrorIs(t, err, wire.ErrNotFound, "%q", id)
		require.ErrorIs(t, s.Delete(id), wire.ErrNotFound, "%q", id)
		require.ErrorIs(t, s.Verify(id), wire.ErrNotFound, "%q", id)
	}
	id := writeSnap(t, s, 1, []byte("x"))
	require.NoError(t, s.Delete(id))
	_, _, err := s.Open(id)
	require.ErrorIs(t, err, wire.ErrNotFound)
	ms, err := s.List()
	require.NoError(t, err)
	require.Empty(t, ms)
}

func testSnapInvalid(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 2)
	m := SnapMeta(1)
	m.Config.Members = nil
	_, err := s.Create(m)
	require.ErrorIs(t, err, storage.ErrInvalid)
	m = SnapMeta(1)
	m.Stamp.QT = edict.QT{{Process: 3}, {Process: 1}}
	_, err = s.Create(m)
	require.ErrorIs(t, err, storage.ErrInvalid)
	m = SnapMeta(1)
	m.Addrs = map[edict.ProcessID]string{9: "x:1"}
	_, err = s.Create(m)
	require.ErrorIs(t, err, storage.ErrInvalid, "an address of a process the configuration does not name")
	m = SnapMeta(1)
	m.Addrs = map[edict.ProcessID]string{2: ""}
	_, err = s.Create(m)
	require.ErrorIs(t, err, storage.ErrInvalid, "an empty address")
	// A snapshot the process took itself carries none.
	m = SnapMeta(1)
	m.Addrs = nil
	sink, err := s.Create(m)
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	ms, err := s.List()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Nil(t, ms[0].Addrs)
}

// testSnapStream writes and reads a snapshot in small pieces, as a store
// streaming one larger than memory would.
func testSnapStream(t *testing.T, h SnapshotHarness) {
	s := h.Open(t, t.TempDir(), 2)
	sink, err := s.Create(SnapMeta(9))
	require.NoError(t, err)
	rng := rand.NewChaCha8([32]byte{1})
	wh := sha256.New()
	const chunk, chunks = 64 << 10, 64 // 4 MiB
	buf := make([]byte, chunk)
	for range chunks {
		rng.Read(buf)
		wh.Write(buf)
		_, err := sink.Write(buf)
		require.NoError(t, err)
	}
	require.NoError(t, sink.Close())
	m, r, err := s.Open(sink.ID())
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, int64(chunk*chunks), m.Size)
	rh := sha256.New()
	small := make([]byte, 4093) // not a divisor of the size
	n, err := io.CopyBuffer(rh, struct{ io.Reader }{r}, small)
	require.NoError(t, err)
	require.Equal(t, int64(chunk*chunks), n)
	require.True(t, bytes.Equal(wh.Sum(nil), rh.Sum(nil)))
	// Reads after the end keep reporting EOF.
	k, err := r.Read(small)
	require.Zero(t, k)
	require.ErrorIs(t, err, io.EOF)
}

func testSnapReopen(t *testing.T, h SnapshotHarness) {
	if !h.Durable {
		t.Skip("store is not durable")
	}
	dir := t.TempDir()
	s := h.Open(t, dir, 3)
	id1 := writeSnap(t, s, 10, []byte("ten"))
	id2 := writeSnap(t, s, 20, []byte("twenty"))
	sink, err := s.Create(SnapMeta(30))
	require.NoError(t, err)
	_, err = sink.Write([]byte("unfinished"))
	require.NoError(t, err)
	// Reopen while a snapshot is unfinished, as after a crash.
	s = h.Open(t, dir, 3)
	ms, err := s.List()
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, id2, ms[0].ID)
	require.Equal(t, id1, ms[1].ID)
	_, b := readSnap(t, s, id2)
	require.Equal(t, "twenty", string(b))
	require.Equal(t, SnapMeta(20).Addrs, ms[0].Addrs, "the addresses are kept with the snapshot")
}
