// Package storagetest is the conformance suite for the stores of package
// storage: RunStore for log and stable stores, RunSnapshotStore for snapshot
// stores. Every implementation, the in-memory ones included, must pass it;
// a new implementation gets the whole behavioural contract by calling these
// from its tests.
package storagetest

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Stamp returns a well-formed stamp of epoch over processes 1..3 whose
// readings and counter derive from seq, so stamps with larger seq are later.
// The readings are as large as real clock readings of a host up for about a
// day, so that encoded sizes (and benchmarks) are realistic.
func Stamp(epoch, seq uint64) edict.Stamp {
	qt := make(edict.QT, 3)
	for i := range qt {
		qt[i] = edict.Reading{Process: edict.ProcessID(i + 1), T: edict.Time{Incarnation: 1 + seq/1000, Nanos: 1<<46 + int64(seq*1000+uint64(i))}}
	}
	return edict.Stamp{Epoch: epoch, QT: qt, Counter: seq}
}

// Entries returns n command entries from index from, of reign, each with
// size bytes of data derived from its index (so a test can recompute them).
func Entries(from uint64, n int, reign edict.Stamp, size int) []wire.Entry {
	es := make([]wire.Entry, n)
	for i := range es {
		idx := from + uint64(i)
		es[i] = wire.Entry{Index: idx, Reign: reign, Stamp: Stamp(reign.Epoch, idx), Kind: wire.EntryCommand, Data: Data(idx, size)}
	}
	return es
}

// Data returns size deterministic bytes for index idx.
func Data(idx uint64, size int) []byte {
	if size == 0 {
		return nil
	}
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], idx)
	b := make([]byte, size)
	rand.NewChaCha8(seed).Read(b)
	return b
}
