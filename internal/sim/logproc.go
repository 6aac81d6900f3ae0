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

	// applyQ is the state machine's queue, as log.Node's applier has one:
	// once a snapshot is accepted, its restore waits at the head until
	// the stream is complete, and entries handed out meanwhile wait
	// behind it. Volatile.
	applyQ []applyJob
	// leading and leaderSince mirror log.Node's: the reading at which
	// this incarnation last began to lead, for the suspend check.
	leading     bool
	leaderSince edict.Time
	// frozenUntil: the host is suspended until this real time; nothing
	// runs on it meanwhile (messages wait, as in its socket buffers).
	frozenUntil int64
	// seenCommit is the commit index this incarnation's core last
	// reported; the checkers look at what lies above it.
	seenCommit uint64
}

// applyJob is an entry for the state machine, or a snapshot to restore.
type applyJob struct {
	entry   storage.Entry
	restore *pendingInstall
}

// pendingInstall is a snapshot accepted by the core and being streamed:
// ready once the stream is complete.
type pendingInstall struct {
	from  edict.ProcessID
	meta  transport.SnapshotMeta
	data  []byte
	pos   storage.Position
	ready bool
	done  func(error) // tells the sender how the stream ended
}

// storedStamp is the stamp of the entry at index i in p's stored log,
// and whether the stored log (not its snapshot) holds one.
func (p *lproc) storedStamp(i uint64) (edict.Stamp, bool) {
	if len(p.stored) == 0 || i < p.stored[0].Index {
		return edict.Stamp{}, false
	}
	k := i - p.stored[0].Index
	if k >= uint64(len(p.stored)) || p.stored[k].Index != i {
		// The stored log is contiguous; fall back to a search should a
		// batch ever break that.
		for _, e := range p.stored {
			if e.Index == i {
				return e.Stamp, true
			}
		}
		return edict.Stamp{}, false
	}
	return p.stored[k].Stamp, true
}

// holdsDurably reports whether p's stores hold index i with stamp st: in
// its stored log, or covered by its stored snapshot (at the snapshot's own
// index, with the same stamp).
func (p *lproc) holdsDurably(i uint64, st edict.Stamp) bool {
	if s, ok := p.storedStamp(i); ok {
		return s.Equal(st)
	}
	if i < p.snapPos.Index {
		return true
	}
	return i == p.snapPos.Index && p.snapPos.Stamp.Equal(st)
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
