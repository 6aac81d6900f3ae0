package sim

import (
	"math"

	"github.com/edictlog/edictlog/edict"
)

// clock is a process's physical clock: piecewise linear in real time, with
// a rate the scenario changes now and then. Its readings continue across
// crashes and restarts; the incarnation is the process's.
type clock struct {
	base  float64 // reading at baseT
	baseT int64
	rate  float64
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

// setRate changes the rate from real time t on.
func (c *clock) setRate(t int64, rate float64) {
	c.base = c.base + c.rate*float64(t-c.baseT)
	c.baseT = t
	c.rate = rate
}

// realAt is the real time at which the clock reads nanos, at the current
// rate (a later rate change moves it; the process re-arms its timer then).
func (c *clock) realAt(nanos int64) int64 {
	d := (float64(nanos) - c.base) / c.rate
	return c.baseT + int64(math.Ceil(d))
}
