package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// A snapshot staged while writes go on leaves the store as it was, across
// a crash too; InstallStaged then makes it the store, in the life that
// staged it and in the next; nothing is staged afterwards.
func TestStageInstall(t *testing.T) {
	src, _ := newMemStore(t, Options{})
	history(t, src, 30)
	data, sn := snapshotBytes(t, src)
	index := sn.Index()

	dst, mem := newMemStore(t, Options{})
	put(t, dst, 1, "mine", "1")
	if _, err := dst.Commit(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dst.Stage(index, bytes.NewReader(data), nil) }()
	put(t, dst, 2, "mine", "2") // writes go on while it stages
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if kv := get(t, dst, "mine", 0); kv == nil || string(kv.Value) != "2" {
		t.Fatalf("staging changed the store: %v", kv)
	}
	if dst.ConsistentIndex() != 2 {
		t.Fatalf("consistent index %d after a Stage", dst.ConsistentIndex())
	}

	// A crash: the store reopens as it was committed, the snapshot staged.
	dst.abandon()
	re, err := Open(mem.Crash(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if kv := get(t, re, "mine", 0); kv == nil || string(kv.Value) != "1" || re.DurableIndex() != 1 {
		t.Fatalf("after the crash: %v at %d", kv, re.DurableIndex())
	}
	if err := re.InstallStaged(index+1, nil); err == nil {
		t.Fatal("installed what was staged for another index")
	}
	if err := re.InstallStaged(index, nil); err != nil {
		t.Fatal(err)
	}
	sameStore(t, src, re)
	if re.DurableIndex() != index {
		t.Fatalf("installed at %d: durable %d", index, re.DurableIndex())
	}
	if err := re.InstallStaged(index, nil); !errors.Is(err, backend.ErrNotStaged) {
		t.Fatalf("a second install: %v", err)
	}

	// In the life that staged it, on a bbolt file, and after a reopen.
	src, _ = newBoltStore(t, Options{})
	history(t, src, 30)
	data, sn = snapshotBytes(t, src)
	index = sn.Index()
	b, path := newBoltStore(t, Options{})
	put(t, b, 1, "mine", "1")
	if err := b.Stage(index, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.InstallStaged(index, nil); err != nil {
		t.Fatal(err)
	}
	sameStore(t, src, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := OpenFile(path, testBoltOptions, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	sameStore(t, src, b2)
	if err := b2.InstallStaged(index, nil); !errors.Is(err, backend.ErrNotStaged) {
		t.Fatalf("installed and reopened, then installed again: %v", err)
	}
}

// A Stage that fails — a damaged stream, one of another index, one whose
// records the application refuses — stages nothing, even where something
// was staged before, and the store is as it was.
func TestStageRefuses(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			src := openKind(t, kind)
			history(t, src, 30)
			txn(t, src, src.ConsistentIndex()+1, func(tw *TxnWrite) {
				if err := tw.PutRecord([]byte("rec"), []byte("ord")); err != nil {
					t.Fatal(err)
				}
			})
			data, sn := snapshotBytes(t, src)
			index := sn.Index()
			dst := openKind(t, kind)
			put(t, dst, 1, "mine", "1")
			refuse := errors.New("the application refuses its records")
			bad := bytes.Clone(data)
			bad[len(bad)/2] ^= 1
			for _, tc := range []struct {
				what  string
				index uint64
				data  []byte
				check func(*RecordView) error
			}{
				{"a flipped byte", index, bad, nil},
				{"cut short", index, data[:len(data)-1], nil},
				{"another index", index + 1, data, nil},
				{"refused records", index, data, func(*RecordView) error { return refuse }},
			} {
				if err := dst.Stage(index, bytes.NewReader(data), nil); err != nil {
					t.Fatal(err)
				}
				if err := dst.Stage(tc.index, bytes.NewReader(tc.data), tc.check); err == nil {
					t.Fatalf("%s: staged", tc.what)
				}
				if err := dst.InstallStaged(index, nil); !errors.Is(err, backend.ErrNotStaged) {
					t.Fatalf("%s: then installed: %v", tc.what, err)
				}
				if kv := get(t, dst, "mine", 0); kv == nil || dst.ConsistentIndex() != 1 {
					t.Fatalf("%s: the store changed", tc.what)
				}
			}
			// The check sees the snapshot's records.
			var seen []string
			err := dst.Stage(index, bytes.NewReader(data), func(rv *RecordView) error {
				rv.Ascend([]byte("r"), nil, func(k, v []byte) bool {
					seen = append(seen, fmt.Sprintf("%s=%s", k, v))
					return true
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(seen) != "[rec=ord]" {
				t.Fatalf("the check saw records %v", seen)
			}
		})
	}
}
