package kvdisk_test

import (
	"bytes"
	"testing"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// FuzzRestore feeds Restore arbitrary streams: it either takes one whole,
// reporting the revision it carries durable and reopening with it, or
// refuses it and keeps the state it had, in memory and on disk.
func FuzzRestore(f *testing.F) {
	kv := kvfsm.NewKV()
	for i := uint64(1); i <= 5; i++ {
		b, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: string(rune('a' + i)), Value: "v"}})
		if err != nil {
			f.Fatal(err)
		}
		kv.Apply(fsm.Entry{Index: i, Stamp: stampAt(i), Data: b})
	}
	s, err := kv.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		f.Fatal(err)
	}
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Add([]byte{kvfsm.SnapshotVersion})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		k, err := kvdisk.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		put(t, k, 1, "before", "1")
		if _, err := k.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := k.Restore(bytes.NewReader(data)); err != nil {
			if d, _ := k.DurableIndex(); d != 1 || k.Revision() != 1 {
				t.Fatalf("a refused stream moved the state to revision %d, durable %d", k.Revision(), d)
			}
			if _, ok := k.Get("before"); !ok {
				t.Fatal("a refused stream lost the state")
			}
			k, err = kvdisk.Open(dir)
			if err != nil {
				t.Fatalf("reopen after a refused stream: %v", err)
			}
			if d, _ := k.DurableIndex(); d != 1 {
				t.Fatalf("reopened after a refused stream at %d", d)
			}
			return
		}
		d, _ := k.DurableIndex()
		if d != k.Revision() {
			t.Fatalf("restored revision %d, durable %d", k.Revision(), d)
		}
		k, err = kvdisk.Open(dir)
		if err != nil {
			t.Fatalf("reopen after a restore: %v", err)
		}
		if got, _ := k.DurableIndex(); got != d {
			t.Fatalf("restored at %d, reopened at %d", d, got)
		}
	})
}
