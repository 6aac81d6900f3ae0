package sim

import (
	"math"

	"github.com/edictlog/edictlog/edict"
)

// clock is a process's physical clock: piecewise linear in real time, with
// a rate the scenario changes now and then. Its readings continue across
// crashes and restarts unless a reboot resets them (reboot); the
// incarnation is the process's, so readings still increase then.
type clock struct {
	base  float64 // reading at baseT
	baseT int64
	rate  float64

	// A host suspend stops the clock (rate 0) until resumeAt; the rate
	// the scenario picks meanwhile takes effect at resumeAt.
	resumeAt   int64
	resumeRate float64
	// suspends are the readings right after each suspend ended: a
	// reading taken before one of them was taken before a suspend
	// (Suspended).
	suspends []edict.Time
}

func newClock(offset float64, rate float64) *clock {
	return &clock{base: offset, rate: rate}
}

// nanos is the physical reading at real time t ≥ baseT.
func (c *clock) nanos(t int64) int64 {
	return int64(math.Floor(c.base + c.rate*float64(t-c.baseT)))
}

// read is C_p(t) for incarnation inc.
func (c *clock) read(t int64, inc uint64) edict.Time {
	return edict.Time{Incarnation: inc, Nanos: c.nanos(t)}
}

// setRate changes the rate from real time t on; during a suspend it
// changes the rate the clock resumes with.
func (c *clock) setRate(t int64, rate float64) {
	if c.suspended(t) {
		c.resumeRate = rate
		return
	}
	c.rebase(t, rate)
}

func (c *clock) rebase(t int64, rate float64) {
	c.base = c.base + c.rate*float64(t-c.baseT)
	c.baseT = t
	c.rate = rate
}

// suspended reports whether the clock is stopped at real time t.
func (c *clock) suspended(t int64) bool { return t < c.resumeAt }

// suspend stops the clock from real time t until real time until, as a
// host suspend does to CLOCK_MONOTONIC_RAW: real time passes, the reading
// does not. The caller runs resume at until.
func (c *clock) suspend(t, until int64) {
	if c.suspended(t) {
		return
	}
	c.resumeRate = c.rate
	c.rebase(t, 0)
	c.resumeAt = until
}

// resume restarts a suspended clock at real time t, and records the
// suspend for Suspended: the first reading after it, inc's, is one
// nanosecond past the reading it stopped at, so every reading taken
// before the suspend is earlier.
func (c *clock) resume(t int64, inc uint64) {
	if c.resumeAt == 0 {
		return
	}
	c.rebase(t, c.resumeRate)
	c.resumeAt = 0
	c.suspends = append(c.suspends, edict.Time{Incarnation: inc, Nanos: c.nanos(t) + 1})
}

// Suspended answers edict.Clock's question for this clock: whether a
// suspend ended after the reading since was taken.
func (c *clock) Suspended(since edict.Time) bool {
	return len(c.suspends) > 0 && since.Before(c.suspends[len(c.suspends)-1])
}

// reboot resets the reading to nanos at real time t, as a host reboot
// restarts CLOCK_MONOTONIC_RAW near zero. A suspend in progress ends: the
// host is running again.
func (c *clock) reboot(t int64, nanos float64) {
	if c.suspended(t) {
		c.rate, c.resumeAt = c.resumeRate, 0
	}
	c.base, c.baseT = nanos, t
}

// realAt is the first real time at which the clock reads at least nanos,
// at the current rate (a later rate change moves it; the process re-arms
// its timer then). A stopped clock reaches nothing before it resumes.
//
// It rounds up, and the loop makes sure of it against float rounding: a
// timer must never fire at a reading a nanosecond short of its deadline,
// or a state machine that checks "now ≥ deadline" does nothing and asks
// for the same deadline again. Timers therefore need no slack of their
// own (elect.Protocol's Tick is called at or after NextTick).
func (c *clock) realAt(nanos int64) int64 {
	if c.rate == 0 {
		return max(c.resumeAt, c.baseT)
	}
	d := (float64(nanos) - c.base) / c.rate
	t := c.baseT + int64(math.Ceil(d))
	for c.nanos(t) < nanos {
		t++
	}
	return t
}
