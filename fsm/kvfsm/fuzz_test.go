package kvfsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/edictlog/edictlog/fsm"
)

// Every decoder must refuse bad input with an error, never panic, and
// whatever it accepts must re-encode to bytes it accepts again, with the
// same encoding (the encoding of a value is a fixed point).

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		b, err := EncodeCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{WireVersion, 0x80})
	f.Add([]byte{WireVersion, 0x81, 0xa1, 'p', 0x81, 0xa1, 'k', 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{WireVersion, 0x81, 0xa1, 't', 0x81, 0xa1, 'c', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Whatever the bytes, Apply answers with an error or a result.
		kv := NewKV()
		res := kv.Apply(fsm.Entry{Index: 1, Stamp: stampAt(1), Data: b})
		c, err := DecodeCommand(b)
		if err != nil {
			if _, ok := res.(error); !ok && len(b) > 0 {
				t.Fatalf("DecodeCommand refused %x (%v) but Apply returned %T", b, err, res)
			}
			if kv.Len() != 0 {
				t.Fatalf("a refused command changed the state")
			}
			return
		}
		if _, ok := res.(*Result); !ok {
			t.Fatalf("decoded %+v but Apply returned %v", c, res)
		}
		again, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", c, err)
		}
		c2, err := DecodeCommand(again)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if third, _ := EncodeCommand(c2); !bytes.Equal(third, again) {
			t.Fatalf("encoding is not stable: %x then %x", again, third)
		}
	})
}

func FuzzDecodeQuery(f *testing.F) {
	for _, r := range []Range{{Key: "a"}, {Key: "a", RangeEnd: "\x00", Limit: 2, KeysOnly: true}, {Key: "\x00", RangeEnd: "\x00", CountOnly: true}} {
		b, err := EncodeQuery(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{WireVersion, 0x80})
	kv := NewKV()
	for i, k := range rangeFixture {
		b, _ := EncodeCommand(Command{Put: &Put{Key: k, Value: "v"}})
		kv.Apply(fsm.Entry{Index: uint64(i + 1), Stamp: stampAt(uint64(i + 1)), Data: b})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, qerr := kv.Query(b)
		r, err := DecodeQuery(b)
		if err != nil {
			if qerr == nil {
				t.Fatalf("DecodeQuery refused %x (%v) but Query answered", b, err)
			}
			return
		}
		if qerr != nil {
			t.Fatalf("query %+v decodes but Query failed: %v", r, qerr)
		}
		if _, err := DecodeResult(out); err != nil {
			t.Fatalf("Query's answer does not decode: %v", err)
		}
		again, err := EncodeQuery(r)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", r, err)
		}
		r2, err := DecodeQuery(again)
		if err != nil || r2 != r {
			t.Fatalf("re-encoded query decodes to %+v, %v; want %+v", r2, err, r)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	kv := KeyValue{Key: "a", Value: "b", CreateRevision: 1, ModRevision: 2, Version: 2, Stamp: stampAt(2)}
	for _, res := range []Result{
		{Revision: 9, Put: &PutResult{PrevKV: &kv}},
		{Revision: 9, Delete: &DeleteResult{Deleted: 1, PrevKVs: []KeyValue{kv}}},
		{Revision: 9, Txn: &TxnResult{Succeeded: true, Responses: []OpResult{{Range: &RangeResult{KVs: []KeyValue{kv}, Count: 3, More: true}}}}},
	} {
		b, err := EncodeResult(&res)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := DecodeResult(b)
		if err != nil {
			return
		}
		again, err := EncodeResult(&res)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", res, err)
		}
		res2, err := DecodeResult(again)
		if err != nil {
			t.Fatalf("re-encoded result does not decode: %v", err)
		}
		if third, _ := EncodeResult(&res2); !bytes.Equal(third, again) {
			t.Fatalf("encoding is not stable: %x then %x", again, third)
		}
	})
}

// FuzzRestore feeds arbitrary bytes to Restore twice: as they are, which
// mostly exercises the checksum, and sealed with a correct CRC-32C
// trailer, which lets the fuzzer reach the record decoder and checks.
// Restore must never panic, must keep the old state on error, and a state
// it accepts must survive Persist and Restore unchanged.
func FuzzRestore(f *testing.F) {
	h := newHarness(f)
	for _, k := range rangeFixture {
		h.put(k, "value of "+k)
	}
	good := persist(f, h.kv)
	f.Add(good)
	f.Add(good[:len(good)-4])
	f.Add(persist(f, NewKV()))
	f.Add([]byte{})
	f.Add([]byte{SnapshotVersion, 0, 0, 0, 2, 0x80})

	victim := NewKV()
	b, _ := EncodeCommand(Command{Put: &Put{Key: "old", Value: "state"}})
	victim.Apply(fsm.Entry{Index: 1, Stamp: stampAt(1), Data: b})

	f.Fuzz(func(t *testing.T, in []byte) {
		for _, b := range [][]byte{in, sealed(bytes.Clone(in))} {
			err := victim.Restore(bytes.NewReader(b))
			if err != nil {
				if kv, ok := victim.Get("old"); !ok || kv.Value != "state" || victim.Revision() != 1 || victim.Len() != 1 {
					t.Fatalf("failed restore (%v) changed the state", err)
				}
				continue
			}
			// The input need not be canonical msgpack, but what Persist
			// writes of the restored state must restore to the same state
			// and persist to the same bytes again.
			out := persist(t, victim)
			again := NewKV()
			if err := again.Restore(bytes.NewReader(out)); err != nil {
				t.Fatalf("restored %x, persisted %x, which fails to restore: %v", b, out, err)
			}
			s1, r1 := state(t, victim)
			s2, r2 := state(t, again)
			if r1 != r2 || !reflect.DeepEqual(s1, s2) {
				t.Fatalf("state changed through persist and restore:\n%+v at %d\n%+v at %d", s1, r1, s2, r2)
			}
			if out2 := persist(t, again); !bytes.Equal(out, out2) {
				t.Fatalf("persist is not stable: %x then %x", out, out2)
			}
			// Put the victim back for the next input.
			victim = NewKV()
			victim.Apply(fsm.Entry{Index: 1, Stamp: stampAt(1), Data: mustEncode(t, &Command{Put: &Put{Key: "old", Value: "state"}})})
		}
	})
}
