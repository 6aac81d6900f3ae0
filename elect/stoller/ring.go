package stoller

import (
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Ring is §2's attendance-list FD [Cri91, CS95]: the members form a
// logical ring (in id order) and one token circulates, each holder
// stamping its entry (Visits+1, and the set it plays dead to) before
// passing it on after Period. A node monitoring j raises ⟨DownSig, j⟩
// when j's stamp did not advance (or hides j from it) over two of its own
// visits since the Start — two, because the Start may fall between j's
// visit and its own. A holder whose successor does not TokenAck within
// Timeout skips it, so the token survives crashes; a node that has not
// seen the token for TokenTimeout regenerates it with a higher (Epoch,
// Origin), and a lower token is acknowledged and dropped, so partitions
// heal to one token. The token costs 2 messages per hop whatever is
// monitored, which is §2's point: cheaper when many monitor many, at the
// price of latency. Choice: the paper's "Are you alive?" pinpointing after
// a lost token is left out; the regenerated token's attendance list
// pinpoints the failure, one rotation later.
type Ring struct {
	base
	cfg     FDConfig
	members []edict.ProcessID

	epoch  uint64
	origin edict.ProcessID
	stamps map[edict.ProcessID]Stamp // newest attendance list seen
	visits uint64                    // own visits this incarnation
	seen   edict.Time                // last time the token was here

	holding  bool
	passAt   edict.Time      // when to pass the held token
	waitAck  edict.ProcessID // successor tried, awaiting TokenAck
	ackBy    edict.Time
	hop      uint64
	watched  map[edict.ProcessID]*ringWatch
	started  bool
	tokenTTL time.Duration
}

type ringWatch struct {
	visit  uint64 // own visit count at the Start or last evidence
	stamp  uint64 // j's Visits then
	raised bool
}

// NewRing returns a factory for ring FDs with cfg's timing.
func NewRing(cfg FDConfig) FDFactory {
	cfg = cfg.withDefaults(20 * time.Millisecond)
	return func(self edict.ProcessID, members []edict.ProcessID, inc uint64) FailureDetector {
		ms := slices.Clone(members)
		slices.Sort(ms)
		return &Ring{base: newBase(self, inc), cfg: cfg, members: ms, stamps: map[edict.ProcessID]Stamp{},
			watched: map[edict.ProcessID]*ringWatch{},
			// One rotation in which every other member is skipped, twice.
			tokenTTL: 2 * time.Duration(len(ms)) * (cfg.Period + cfg.Timeout)}
	}
}

// Latency is τ_FD for a maximum delay delta: a lost token is regenerated
// within TokenTimeout, then two rotations of at most N hops, each holding
// Period and waiting up to Timeout for a skipped successor.
func (f *Ring) Latency(delta time.Duration) time.Duration {
	n := time.Duration(len(f.members))
	return f.tokenTTL + 2*n*(f.cfg.Period+f.cfg.Timeout+delta)
}

func (f *Ring) Start(now edict.Time, j edict.ProcessID) {
	f.watched[j] = &ringWatch{visit: f.visits, stamp: f.stamps[j].Visits}
	f.kick(now)
}

// kick starts the ring on first use: the lowest member creates the token,
// the others wait TokenTimeout for it.
func (f *Ring) kick(now edict.Time) {
	if f.started {
		return
	}
	f.started = true
	f.seen = now
	if len(f.members) > 0 && f.members[0] == f.self {
		f.epoch, f.origin = 1, f.self
		f.visit(now)
	}
}

func (f *Ring) Stop(_ edict.Time, j edict.ProcessID) { delete(f.watched, j) }

func (f *Ring) Observe(elect.Observation) {}

func (f *Ring) newer(m Message) int {
	switch {
	case m.Epoch != f.epoch:
		return cmp(m.Epoch, f.epoch)
	default:
		return cmp(uint64(m.Origin), uint64(f.origin))
	}
}

func cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *Ring) Receive(now edict.Time, from edict.ProcessID, m Message) {
	f.kick(now)
	switch m.Kind {
	case Token:
		f.send(from, Message{Kind: TokenAck, Epoch: m.Epoch, Origin: m.Origin, Seq: m.Seq})
		if c := f.newer(m); c < 0 || (c == 0 && f.holding) {
			return // superseded, or a duplicate of the token we hold
		}
		f.epoch, f.origin, f.hop = m.Epoch, m.Origin, m.Seq
		for _, s := range m.Stamps {
			if s.Visits >= f.stamps[s.Node].Visits {
				f.stamps[s.Node] = s
			}
		}
		f.visit(now)
	case TokenAck:
		if f.waitAck == from && m.Epoch == f.epoch && m.Origin == f.origin && m.Seq == f.hop {
			f.waitAck = edict.None
		}
	}
}

// visit is this node holding the token: stamp, check attendance, hold.
func (f *Ring) visit(now edict.Time) {
	f.holding, f.waitAck = true, edict.None
	f.seen = now
	f.visits++
	hidden := slices.Sorted(maps.Keys(f.deadTo))
	f.stamps[f.self] = Stamp{Node: f.self, Visits: f.stamps[f.self].Visits + 1, Hidden: hidden}
	for _, j := range slices.Sorted(maps.Keys(f.watched)) {
		w, s := f.watched[j], f.stamps[j]
		switch {
		case w.raised:
		case s.Visits > w.stamp && !slices.Contains(s.Hidden, f.self):
			w.visit, w.stamp = f.visits, s.Visits
		case f.visits-w.visit >= 2:
			w.raised = true
			f.signals = append(f.signals, j)
		}
	}
	f.passAt = now.Add(f.cfg.Period)
}

// pass sends the token to the next member after after, skipping self.
func (f *Ring) pass(now edict.Time, after edict.ProcessID) {
	i, _ := slices.BinarySearch(f.members, after)
	for k := 1; k <= len(f.members); k++ {
		next := f.members[(i+k)%len(f.members)]
		if next == f.self {
			f.visit(now) // alone: keep it
			return
		}
		f.hop++
		f.holding, f.waitAck, f.ackBy = false, next, now.Add(f.cfg.Timeout)
		m := Message{Kind: Token, Epoch: f.epoch, Origin: f.origin, Seq: f.hop}
		for _, id := range slices.Sorted(maps.Keys(f.stamps)) {
			m.Stamps = append(m.Stamps, f.stamps[id])
		}
		f.send(next, m)
		return
	}
}

func (f *Ring) Tick(now edict.Time) {
	f.kick(now)
	switch {
	case f.holding && !now.Before(f.passAt):
		f.pass(now, f.self)
	case f.waitAck != edict.None && !now.Before(f.ackBy):
		f.pass(now, f.waitAck) // skip the silent successor
	case !f.holding && f.waitAck == edict.None && !now.Before(f.seen.Add(f.tokenTTL)):
		f.epoch, f.origin = f.epoch+1, f.self
		f.visit(now)
	}
}

func (f *Ring) NextTick() edict.Time {
	switch {
	case !f.started:
		return edict.Time{}
	case f.holding:
		return f.passAt
	case f.waitAck != edict.None:
		return f.ackBy
	}
	return f.seen.Add(f.tokenTTL)
}
