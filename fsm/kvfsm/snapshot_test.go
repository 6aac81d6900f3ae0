package kvfsm

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/edictlog/edictlog/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func persist(t testing.TB, kv *KV) []byte {
	t.Helper()
	s, err := kv.Snapshot()
	require.NoError(t, err)
	defer s.Release()
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	return buf.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t)
			for i := range n {
				h.put(fmt.Sprintf("key/%05d", i), strings.Repeat("v", i%300))
				if i%7 == 0 {
					h.put(fmt.Sprintf("key/%05d", i), "rewritten") // version 2
				}
				if i%11 == 0 {
					h.do(Command{Delete: &Delete{Key: fmt.Sprintf("key/%05d", i/2)}})
				}
			}
			h.raw(nil) // the revision counts no-ops too
			want, wantRev := state(t, h.kv)

			b := persist(t, h.kv)
			kv := NewKV()
			require.NoError(t, kv.Restore(bytes.NewReader(b)))
			got, gotRev := state(t, kv)
			assert.Equal(t, want, got)
			assert.Equal(t, wantRev, gotRev)
			assert.Equal(t, h.kv.Len(), kv.Len())
			assert.Equal(t, b, persist(t, kv), "a restored state persists to the same bytes")

			// A snapshot of the restored state is point-in-time too.
			s, err := kv.Snapshot()
			require.NoError(t, err)
			defer s.Release()

			// Applying continues from the snapshot's index.
			b2, err := EncodeCommand(Command{Put: &Put{Key: "after", Value: "x"}})
			require.NoError(t, err)
			res := kv.Apply(fsm.Entry{Index: wantRev + 1, Stamp: stampAt(wantRev + 1), Data: b2})
			assert.Equal(t, wantRev+1, res.(*Result).Revision)
			assert.ErrorIs(t, kv.Apply(fsm.Entry{Index: wantRev, Data: b2}).(error), ErrOutOfOrder,
				"after a restore, entries up to the snapshot's index are refused")
			var buf bytes.Buffer
			require.NoError(t, s.Persist(&buf))
			assert.Equal(t, b, buf.Bytes(), "the write after fsm.Snapshot is not in it")
		})
	}
}

// Persist writes the state as of fsm.Snapshot, whatever is applied after it.
func TestSnapshotIsPointInTime(t *testing.T) {
	h := newHarness(t)
	for i := range 2000 {
		h.put(fmt.Sprintf("k%04d", i), "before")
	}
	want, wantRev := state(t, h.kv)
	s, err := h.kv.Snapshot()
	require.NoError(t, err)
	defer s.Release()

	// Writes after the snapshot: overwrite, delete, create, in every part
	// of the tree; half before Persist starts, half while it runs.
	write := func(from, to int) {
		for i := from; i < to; i++ {
			switch i % 3 {
			case 0:
				h.put(fmt.Sprintf("k%04d", i), "after")
			case 1:
				h.do(Command{Delete: &Delete{Key: fmt.Sprintf("k%04d", i)}})
			default:
				h.put(fmt.Sprintf("new%04d", i), "after")
			}
		}
	}
	write(0, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		write(1000, 2000)
	}()
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	<-done

	kv := NewKV()
	require.NoError(t, kv.Restore(&buf))
	got, gotRev := state(t, kv)
	assert.Equal(t, wantRev, gotRev)
	assert.Equal(t, want, got)
	now, _ := state(t, h.kv)
	assert.NotEqual(t, want, now, "the writes did happen")
}

func TestPersistAfterReleaseFails(t *testing.T) {
	s, err := NewKV().Snapshot()
	require.NoError(t, err)
	s.Release()
	assert.ErrorContains(t, s.Persist(io.Discard), "released")
}

func TestPersistReportsWriteErrors(t *testing.T) {
	h := newHarness(t)
	for i := range 100 {
		h.put(fmt.Sprintf("k%03d", i), strings.Repeat("x", 1000))
	}
	s, _ := h.kv.Snapshot()
	defer s.Release()
	boom := errors.New("disk full")
	err := s.Persist(&failingWriter{n: 50_000, err: boom})
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "persist KV snapshot at revision 100")
}

type failingWriter struct {
	n   int
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, w.err
	}
	w.n -= len(p)
	return len(p), nil
}

// restoreFails checks that restoring b fails with an error mentioning msg
// and leaves kv exactly as it was.
func restoreFails(t *testing.T, kv *KV, b []byte, msg string) error {
	t.Helper()
	before, rev := state(t, kv)
	err := kv.Restore(bytes.NewReader(b))
	require.Error(t, err)
	assert.Contains(t, err.Error(), msg)
	after, rev2 := state(t, kv)
	require.Equal(t, rev, rev2, "a failed restore keeps the revision")
	require.Equal(t, before, after, "a failed restore keeps the state")
	return err
}

func snapshotFixture(t *testing.T) (good []byte, victim *KV) {
	h := newHarness(t)
	for i := range 20 {
		h.put(fmt.Sprintf("key%02d", i), fmt.Sprintf("value %d", i))
	}
	h.put("key03", "again")
	good = persist(t, h.kv)

	victim = NewKV()
	v := newHarness(t)
	v.kv = victim
	v.put("old", "state")
	return good, victim
}

func TestRestoreRefusesEveryBitFlip(t *testing.T) {
	good, victim := snapshotFixture(t)
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		err := restoreFails(t, victim, b, "fsm: restore KV snapshot")
		if i/8 == 0 {
			assert.ErrorContains(t, err, "unknown version byte")
		}
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("bit %d: error does not wrap ErrCorruptSnapshot: %v", i, err)
		}
	}
	// A flip inside a value decodes fine; only the checksum catches it.
	i := bytes.Index(good, []byte("value 7"))
	b := bytes.Clone(good)
	b[i] ^= 1
	restoreFails(t, victim, b, "checksum mismatch")
}

func TestRestoreRefusesTruncationAndExtraBytes(t *testing.T) {
	good, victim := snapshotFixture(t)
	for n := range len(good) {
		err := restoreFails(t, victim, good[:n], "truncated")
		assert.ErrorIs(t, err, ErrCorruptSnapshot)
	}
	restoreFails(t, victim, append(bytes.Clone(good), 0), "trailing bytes after the checksum trailer")
}

func TestRestoreRefusesInvalidRecords(t *testing.T) {
	_, victim := snapshotFixture(t)
	kv := func(mut func(*KeyValue)) KeyValue {
		r := KeyValue{Key: "k", Value: "v", CreateRevision: 2, ModRevision: 5, Version: 3, Stamp: stampAt(5)}
		mut(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		rev  uint64
		kvs  []KeyValue
		msg  string
	}{
		{"empty key", 9, []KeyValue{kv(func(r *KeyValue) { r.Key = "" })}, "empty key"},
		{"create revision 0", 9, []KeyValue{kv(func(r *KeyValue) { r.CreateRevision = 0 })}, "create revision 0"},
		{"mod before create", 9, []KeyValue{kv(func(r *KeyValue) { r.ModRevision = 1 })}, "mod revision 1 before create revision 2"},
		{"mod after snapshot", 4, []KeyValue{kv(func(*KeyValue) {})}, "after the snapshot's revision 4"},
		{"version 0", 9, []KeyValue{kv(func(r *KeyValue) { r.Version = 0 })}, "version 0 impossible"},
		{"too many versions", 9, []KeyValue{kv(func(r *KeyValue) { r.Version = 5 })}, "version 5 impossible"},
		{"bad stamp", 9, []KeyValue{kv(func(r *KeyValue) { r.Stamp.QT = r.Stamp.QT[:0:0]; r.Stamp.Counter = 1 })}, "without a quorum timestamp"},
		{"unsorted", 9, []KeyValue{kv(func(r *KeyValue) { r.Key = "b" }), kv(func(r *KeyValue) { r.Key = "a" })}, `record 2 of 2: key "a" does not follow "b"`},
		{"duplicate", 9, []KeyValue{kv(func(*KeyValue) {}), kv(func(*KeyValue) {})}, `key "k" does not follow "k"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := restoreFails(t, victim, craftSnapshot(t, snapHeader{Revision: tc.rev, Count: uint64(len(tc.kvs))}, tc.kvs), tc.msg)
			assert.ErrorIs(t, err, ErrCorruptSnapshot)
		})
	}
	restoreFails(t, victim, craftSnapshot(t, snapHeader{Revision: 9, Count: 2}, []KeyValue{kv(func(*KeyValue) {})}), "record 2 of 2")
	restoreFails(t, victim, craftSnapshot(t, snapHeader{Revision: 0, Count: 1}, nil), "1 keys at revision 0")
	restoreFails(t, victim, sealed([]byte{SnapshotVersion, 0, 0, 0, 0}), "header: empty record")
	restoreFails(t, victim, sealed([]byte{SnapshotVersion, 0xff, 0xff, 0xff, 0xff}), "exceeds the limit")
	restoreFails(t, victim, nil, "truncated in version byte")
	restoreFails(t, victim, sealed([]byte{7}), "unknown version byte 7")

	// A record with a field it should not have.
	body := rawMsgpack(t, map[string]any{"k": "a", "c": 1, "m": 1, "n": 1, "x": 1})[1:]
	b := craftSnapshot(t, snapHeader{Revision: 9, Count: 1}, nil)
	b = sealed(append(append(b[:len(b)-4], frameLen(body)...), body...))
	restoreFails(t, victim, b, "record 1 of 1 at offset")
}

// craftSnapshot writes a snapshot with the given header and records,
// valid or not, with a correct checksum.
func craftSnapshot(t *testing.T, h snapHeader, kvs []KeyValue) []byte {
	b := []byte{SnapshotVersion}
	for _, v := range append([]any{&h}, anySlice(kvs)...) {
		body := rawMsgpack(t, v)[1:]
		b = append(append(b, frameLen(body)...), body...)
	}
	return sealed(b)
}

func anySlice(kvs []KeyValue) []any {
	out := make([]any, len(kvs))
	for i := range kvs {
		out[i] = &kvs[i]
	}
	return out
}

func frameLen(body []byte) []byte {
	n := len(body)
	return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

// sealed appends the CRC-32C trailer to b.
func sealed(b []byte) []byte {
	sum := crc32Sum(b)
	return append(b, byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum))
}

func TestRestorePassesOnReaderErrors(t *testing.T) {
	good, victim := snapshotFixture(t)
	digest := errors.New("snapshot store: sha256 mismatch")
	// The store reports a bad digest at the very end, instead of io.EOF.
	r := io.MultiReader(bytes.NewReader(good), iotest.ErrReader(digest))
	before, _ := state(t, victim)
	err := victim.Restore(r)
	assert.ErrorIs(t, err, digest)
	after, _ := state(t, victim)
	assert.Equal(t, before, after)

	err = victim.Restore(io.MultiReader(bytes.NewReader(good[:40]), iotest.ErrReader(digest)))
	assert.ErrorIs(t, err, digest)
	assert.NotErrorIs(t, err, ErrCorruptSnapshot, "an I/O error is not called corruption")

	// Byte-at-a-time and timeout-ish readers must work too.
	kv := NewKV()
	require.NoError(t, kv.Restore(iotest.OneByteReader(bytes.NewReader(good))))
	require.NoError(t, kv.Restore(iotest.DataErrReader(bytes.NewReader(good))))
	assert.Equal(t, 20, kv.Len())
}

func crc32Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
