package kvfsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/fsm"
)

const benchKeys = 100_000

func benchKey(i int) string { return fmt.Sprintf("bench/key/%08d", i%benchKeys) }

func putCommands(b *testing.B) [][]byte {
	value := strings.Repeat("v", 256)
	cmds := make([][]byte, 4096)
	for i := range cmds {
		c, err := EncodeCommand(Command{Put: &Put{Key: benchKey(i * 7919), Value: value}})
		if err != nil {
			b.Fatal(err)
		}
		cmds[i] = c
	}
	return cmds
}

// BenchmarkApplyPut applies encoded Puts of 256-byte values over 100k keys,
// decoding included, as the log would call it.
func BenchmarkApplyPut(b *testing.B) {
	cmds := putCommands(b)
	kv := NewKV()
	stamp := stampAt(1)
	idx := uint64(0)
	b.SetBytes(256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		idx++
		if _, ok := kv.Apply(fsm.Entry{Index: idx, Stamp: stamp, Data: cmds[i%len(cmds)]}).(*Result); !ok {
			b.Fatal("apply failed")
		}
	}
}

// BenchmarkApplyBatchPut is BenchmarkApplyPut through ApplyBatch, 64
// entries at a time; figures are per batch.
func BenchmarkApplyBatchPut(b *testing.B) {
	cmds := putCommands(b)
	es := make([]fsm.Entry, 64)
	kv := NewKV()
	stamp := stampAt(1)
	idx := uint64(0)
	b.SetBytes(256 * int64(len(es)))
	b.ReportAllocs()
	for b.Loop() {
		for i := range es {
			idx++
			es[i] = fsm.Entry{Index: idx, Stamp: stamp, Data: cmds[idx%uint64(len(cmds))]}
		}
		kv.ApplyBatch(es)
	}
}

func loadedKV(b *testing.B) *KV {
	kv := NewKV()
	value := strings.Repeat("v", 256)
	for i := range benchKeys {
		c, _ := EncodeCommand(Command{Put: &Put{Key: benchKey(i), Value: value}})
		kv.Apply(fsm.Entry{Index: uint64(i + 1), Stamp: stampAt(1), Data: c})
	}
	return kv
}

// BenchmarkQueryGet answers encoded single-key Ranges from 100k keys:
// decode, lookup, encode.
func BenchmarkQueryGet(b *testing.B) {
	kv := loadedKV(b)
	qs := make([][]byte, 4096)
	for i := range qs {
		q, err := EncodeQuery(Range{Key: benchKey(i * 7919)})
		if err != nil {
			b.Fatal(err)
		}
		qs[i] = q
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := kv.Query(qs[i%len(qs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet is the in-process point read, for comparison.
func BenchmarkGet(b *testing.B) {
	kv := loadedKV(b)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = benchKey(i * 7919)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := kv.Get(keys[i%len(keys)]); !ok {
			b.Fatal("missing key")
		}
	}
}
