package mvcc

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

func FuzzDecodeRevKey(f *testing.F) {
	f.Add(revKey(Revision{Main: 2, Sub: 0}, false))
	f.Add(revKey(Revision{Main: 1 << 40, Sub: 7}, true))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, markedRevKeyLen))
	f.Add(append(revKey(Revision{Main: 3}, false), 'x'))
	f.Fuzz(func(t *testing.T, k []byte) {
		rev, tomb, err := decodeRevKey(k)
		if err != nil {
			return
		}
		if got := revKey(rev, tomb); !bytes.Equal(got, k) {
			t.Fatalf("%x decodes to %d.%d (tombstone %v), which encodes to %x", k, rev.Main, rev.Sub, tomb, got)
		}
		if rev.Main < 1 || rev.Sub < 0 {
			t.Fatalf("%x: revision %d.%d accepted", k, rev.Main, rev.Sub)
		}
	})
}

func FuzzDecodeValue(f *testing.F) {
	good, _ := (&mvccpb.KeyValue{Key: []byte("a"), Value: []byte("v"), CreateRevision: 2, ModRevision: 3, Version: 2, Lease: 9}).Marshal()
	tomb, _ := (&mvccpb.KeyValue{Key: []byte("a")}).Marshal()
	f.Add(int64(3), false, good)
	f.Add(int64(4), true, tomb)
	f.Add(int64(3), true, good)
	f.Add(int64(2), false, good)
	f.Add(int64(1), false, []byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, main int64, tombstone bool, v []byte) {
		kv, err := decodeValue(Revision{Main: main}, tombstone, v)
		if err != nil {
			return
		}
		if len(kv.Key) == 0 {
			t.Fatal("empty key accepted")
		}
		if tombstone {
			if kv.ModRevision != 0 || kv.Version != 0 || len(kv.Value) != 0 {
				t.Fatalf("tombstone with content accepted: %v", kv)
			}
			return
		}
		if kv.ModRevision != main || kv.CreateRevision < 1 || kv.CreateRevision > main || kv.Version < 1 {
			t.Fatalf("at %d accepted %v", main, kv)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeCompactRev(5))
	f.Add(encodeUint64(7))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, v []byte) {
		if rev, err := decodeCompactRev(metaScheduledCompact, v); err == nil && !bytes.Equal(encodeCompactRev(rev), v) {
			t.Fatalf("%x decodes to compaction %d, which encodes otherwise", v, rev)
		}
		if rev, err := decodeRevIndexKey(v); err == nil && !bytes.Equal(revIndexKey(rev), v) {
			t.Fatalf("%x decodes to revision %d, which encodes otherwise", v, rev)
		}
	})
}

// TestOpenRefusesCorruptEntries damages one stored entry at a time and
// expects Open to refuse the store with an error naming what is wrong.
func TestOpenRefusesCorruptEntries(t *testing.T) {
	key, meta, revb := bucketNames[bucketKey], bucketNames[bucketMeta], bucketNames[bucketRev]
	kv := func(k string, create, mod, ver int64) []byte {
		b, _ := (&mvccpb.KeyValue{Key: []byte(k), Value: []byte("v"), CreateRevision: create, ModRevision: mod, Version: ver}).Marshal()
		return b
	}
	cases := []struct {
		name   string
		damage func(b *backend.Batch)
		want   string
	}{
		{"short revision key", func(b *backend.Batch) { b.Put(key, []byte("\x00\x00\x00\x00\x00\x00\x00\x09_"), kv("a", 9, 9, 1)) }, "00000000000000095f"},
		{"bad separator", func(b *backend.Batch) {
			b.Put(key, []byte("\x00\x00\x00\x00\x00\x00\x00\x09-\x00\x00\x00\x00\x00\x00\x00\x00"), kv("a", 9, 9, 1))
		}, "separator"},
		{"bad mark", func(b *backend.Batch) { b.Put(key, append(revKey(Revision{Main: 9}, false), 'x'), kv("a", 9, 9, 1)) }, "mark"},
		{"not protobuf", func(b *backend.Batch) { b.Put(key, revKey(Revision{Main: 9}, false), []byte{0x0a, 0x7f}) }, "9.0"},
		{"mod revision off", func(b *backend.Batch) { b.Put(key, revKey(Revision{Main: 9}, false), kv("z", 9, 8, 1)) }, `"z"`},
		{"version off", func(b *backend.Batch) { b.Put(key, revKey(Revision{Main: 9}, false), kv("a", 2, 9, 7)) }, `"a" has version 7`},
		{"tombstone of nothing", func(b *backend.Batch) {
			tomb, _ := (&mvccpb.KeyValue{Key: []byte("a")}).Marshal()
			b.Put(key, revKey(Revision{Main: 9}, true), tomb)
			b.Put(key, revKey(Revision{Main: 10}, true), tomb)
			b.Put(revb, revIndexKey(9), encodeUint64(3))
			b.Put(revb, revIndexKey(10), encodeUint64(3))
		}, "does not exist"},
		{"missing revision entry", func(b *backend.Batch) { b.Put(key, revKey(Revision{Main: 9}, false), kv("n", 9, 9, 1)) }, "revision bucket ends at revision 3"},
		{"bad consistent index", func(b *backend.Batch) { b.Put(meta, metaConsistentIndex, []byte{1}) }, "consistent_index"},
		{"bad compaction mark", func(b *backend.Batch) { b.Put(meta, metaFinishedCompact, []byte("x")) }, "finishedCompactRev"},
		{"foreign format", func(b *backend.Batch) { b.Put(meta, metaFormat, []byte("etcd")) }, "edictkv_format"},
		{"bad revision bucket key", func(b *backend.Batch) { b.Put(revb, []byte{1}, encodeUint64(1)) }, "revision bucket key"},
		{"revision index from the future", func(b *backend.Batch) { b.Put(revb, revIndexKey(3), encodeUint64(99)) }, "log index 99"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, m := newMemStore(t, Options{})
			put(t, s, 1, "a", "1")
			put(t, s, 2, "a", "2")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			m = m.Crash()
			b := &backend.Batch{}
			c.damage(b)
			if err := m.Commit(b); err != nil {
				t.Fatal(err)
			}
			_, err := Open(m.Crash(), Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrCorrupt naming %q", err, c.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}
