package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// lproc is one simulated process of the replicated log: a log.Core with a
// KV state machine, and what its stores hold (which survives a crash).
type lproc struct {
	id    edict.ProcessID
	clock *clock
	inc   uint64
	core  *log.Core
	kv    *fsm.KV
	up    bool

	// Durable state, kept across crashes.
	stored   []storage.Entry
	stable   map[string][]byte
	snapshot []byte           // the KV snapshot's bytes
	snapPos  storage.Position // what it covers
	epochs   []storage.EpochConfig

	detector elect.Detector
	rng      *rand.Rand

	applied uint64
	tick    tickTimer
	started bool
}

func (p *lproc) now(t int64) edict.Time { return p.clock.read(t, p.inc) }

// persist applies a Ready's batch to the durable state.
func (p *lproc) persist(b storage.Batch) {
	if b.Reset != nil {
		p.stored = nil
	}
	if b.TruncateFrom != 0 {
		for i, e := range p.stored {
			if e.Index >= b.TruncateFrom {
				p.stored = p.stored[:i]
				break
			}
		}
	}
	p.stored = append(p.stored, b.Entries...)
	for k, v := range b.Stable {
		p.stable[k] = v
	}
	for _, k := range b.Delete {
		delete(p.stable, k)
	}
}

// restartState is what the process reads from its stores on a restart.
func (p *lproc) restartState() (log.State, error) {
	st := log.State{Snapshot: p.snapPos}
	for _, k := range slices.Sorted(mapsKeys(p.stable)) {
		v := p.stable[k]
		switch {
		case bytesHasSuffix(k, "/config"):
			ec, err := storage.DecodeEpochConfig(k, v)
			if err != nil {
				return st, err
			}
			st.Epochs = append(st.Epochs, ec)
		case bytesHasSuffix(k, "/wedge"):
			r, err := log.DecodeEpochRecord(k, v)
			if err != nil {
				return st, err
			}
			st.Records = append(st.Records, r)
		case k == storage.KeyAcceptedReign:
			r, err := storage.DecodeStamp(k, v)
			if err != nil {
				return st, err
			}
			st.AcceptedReign = r
		}
	}
	if len(st.Epochs) == 0 {
		// A first start records its bootstrap configuration, as
		// log.Start does: later records of that epoch need it.
		st.Epochs = p.epochs
		for _, ec := range p.epochs {
			b, err := storage.EncodeEpochConfig(ec)
			if err != nil {
				return st, err
			}
			p.stable[storage.EpochConfigKey(ec.Epoch)] = b
		}
	}
	for _, e := range p.stored {
		if e.Index > p.snapPos.Index {
			st.Entries = append(st.Entries, e)
		}
	}
	if len(st.Entries) > 0 && st.Entries[0].Index != p.snapPos.Index+1 {
		return st, fmt.Errorf("%v: stored log starts at %d after a snapshot ending at %d", p.id, st.Entries[0].Index, p.snapPos.Index)
	}
	p.kv = fsm.NewKV()
	if p.snapshot != nil {
		if err := p.kv.Restore(bytes.NewReader(p.snapshot)); err != nil {
			return st, err
		}
	}
	p.applied = p.snapPos.Index
	return st, nil
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func bytesHasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

var _ = transport.Message{}
