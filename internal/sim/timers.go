package sim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
)

// tickTimer schedules a process's next Tick at the real time its clock
// reaches the core's NextTick, keeping at most one live event: an earlier
// deadline replaces a later one, a stale event does nothing.
type tickTimer struct {
	gen     uint64
	at      int64
	pending bool
}

// reset forgets the pending event (a clock rate change moved the deadline,
// or the process restarted).
func (t *tickTimer) reset() { t.pending = false }

// arm schedules fire at the real time c reads next, unless an event no
// later is already pending. A deadline in another incarnation (the core
// has nothing scheduled) is retried after fallback.
func (t *tickTimer) arm(w *world, c *clock, inc uint64, next edict.Time, fallback time.Duration, live func() bool, fire func()) {
	at := c.realAt(next.Nanos)
	if next.Incarnation != inc {
		at = w.now + int64(fallback)
	}
	if t.pending && t.at <= at {
		return
	}
	t.gen++
	gen := t.gen
	t.at, t.pending = at, true
	w.at(at, func() {
		if t.gen != gen || !live() {
			return
		}
		t.pending = false
		fire()
	})
}

// every runs f at jittered intervals until the world reaches until or stop
// says so.
func (w *world) every(interval time.Duration, until int64, stop func() bool, f func()) {
	var loop func()
	loop = func() {
		if w.now >= until || stop() {
			return
		}
		f()
		w.after(w.between(interval/2, interval*3/2), loop)
	}
	w.after(w.between(0, interval), loop)
}

// pickRate draws a clock rate inside the scenario's drift range, or at
// one of its ends with DriftExtreme.
func (sc *Scenario) pickRate(w *world) float64 {
	span := sc.DriftFactor * sc.Rho
	if sc.DriftExtreme {
		if w.rng.IntN(2) == 0 {
			return 1 - span
		}
		return 1 + span
	}
	return 1 - span + 2*span*w.rng.Float64()
}

// partitionRandomly heals the network, or splits off a random side,
// sometimes one way only.
func (n *network) partitionRandomly(ids []edict.ProcessID) {
	if n.w.chance(0.3) {
		n.heal()
		return
	}
	var side []edict.ProcessID
	for _, id := range ids {
		if n.w.chance(0.4) {
			side = append(side, id)
		}
	}
	n.partition(side, ids, n.w.chance(0.3))
}
