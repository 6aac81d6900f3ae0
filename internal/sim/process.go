package sim

import (
	"math/rand/v2"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// pastLife is an earlier incarnation's core, kept for ground truth: its
// grants still count until they expire (see the package doc).
type pastLife struct {
	inc  uint64
	core *elect.Core
}

// process is one simulated process: its clock, its current core (kept, as
// the paper assumes, while it is crashed), and what it persisted.
type process struct {
	id    edict.ProcessID
	clock *clock
	inc   uint64
	core  *elect.Core
	up    bool
	past  []pastLife

	// Persisted across restarts (the stable store).
	records map[uint64]wire.EpochRecord
	epochs  []wire.EpochConfig
	// cleanStopOf is the incarnation of the last life that ended with a
	// clean stop (wire.KeyCleanStop); downAfterRetire is how long p stays
	// down once its retiring life reports Retired (zero: not retiring).
	cleanStopOf     uint64
	downAfterRetire time.Duration

	detector elect.Detector
	rng      *rand.Rand

	tick tickTimer

	prevF map[uint64]fState // for eq. 16

	// For the rogue-leader negative control.
	lastQT    edict.QT
	lastEpoch uint64
	rogueN    uint64

	releases   []int64                   // real times of voluntary releases
	verifySent map[edict.ProcessID]int64 // real time of the last verify sent to each
	started    bool
}

type fState struct {
	finish  edict.Time
	grantee edict.ProcessID
	wedged  bool
}

// now is C_p at the world's current time.
func (p *process) now(t int64) edict.Time { return p.clock.read(t, p.inc) }

// persistedRecords lists the stable records for a restart.
func (p *process) persistedRecords() []wire.EpochRecord {
	var rs []wire.EpochRecord
	for _, e := range p.epochs {
		if r, ok := p.records[e.Epoch]; ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// effectiveGrant is γ ground truth: whom q grants to in epoch at real time
// t, and whether q is wedged there. The current core decides if it is
// wedged; its last grant, and any earlier incarnation's, counts until it
// expires, wedged or not: a wedge ends only the grants to come, and a
// leader may carry its lease past its epoch's end on grants that stand
// (elect.Core.WedgeKeeping).
func (p *process) effectiveGrant(epoch uint64, t int64) (edict.ProcessID, bool) {
	if p.core == nil {
		return edict.None, false
	}
	gs, ok := p.core.Grant(epoch)
	wedged := ok && gs.Wedged
	if ok && gs.Grantee != edict.None && p.clock.read(t, p.inc).Before(gs.Finish) {
		return gs.Grantee, wedged
	}
	for i := len(p.past) - 1; i >= 0; i-- {
		l := p.past[i]
		if gs, ok := l.core.Grant(epoch); ok && gs.Grantee != edict.None && p.clock.read(t, l.inc).Before(gs.Finish) {
			return gs.Grantee, wedged
		}
	}
	return edict.None, wedged
}

// pruneGrants drops past lives whose grants have all expired, in any of
// the run's epochs: a past life may have granted in an epoch the present
// one does not know (it heard of it only from a peer's news).
func (p *process) pruneGrants(t int64, epochs []wire.EpochConfig) {
	keep := p.past[:0]
	for _, l := range p.past {
		live := false
		for _, e := range epochs {
			if gs, ok := l.core.Grant(e.Epoch); ok && gs.Grantee != edict.None && p.clock.read(t, l.inc).Before(gs.Finish) {
				live = true
			}
		}
		if live {
			keep = append(keep, l)
		}
	}
	p.past = keep
}
