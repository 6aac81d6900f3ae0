package edict

import (
	"sync"
	"time"
)

// Clock is a process's clock C_p (§2). Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now samples C_p. Successive samples strictly increase (eq. 8), and
	// between samples the clock advances at a rate within 1±ρ of real time
	// (eq. 15) — the assumption the configured ρ documents.
	Now() Time
	// Suspended reports whether, between the reading since and the
	// clock's latest reading, the clock may have run slower than real
	// time by more than ρ allows (a host suspend or VM freeze that the raw
	// clock does not count). It judges as of the latest reading, so a
	// caller takes one with Now first, as replog.Driver does on every input;
	// it need not read the clock again, which on Linux costs three system
	// calls. A leader treats its lease as expired when it does: a leader
	// must never see time pass slower than it does (docs/protocol.md, "Clocks"). Granters
	// ignore it: a granter whose clock stops only holds its grant longer.
	Suspended(since Time) bool
}

// ManualClock is a Clock that moves only when told to. It is for tests and
// examples; the simulator has its own drifting clocks.
type ManualClock struct {
	mu        sync.Mutex
	now       Time
	suspended Time // reading after which a suspend was injected
}

// NewManualClock returns a clock reading start.
func NewManualClock(start Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the current reading, advancing it by 1ns so that samples
// strictly increase.
func (c *ManualClock) Now() Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now.Nanos++
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Suspend models a suspend of the host: real time passes but the clock does
// not see it, so Suspended reports true for every earlier reading.
func (c *ManualClock) Suspend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now.Nanos++
	c.suspended = c.now
}

// Suspended implements Clock.
func (c *ManualClock) Suspended(since Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.suspended.IsZero() && since.Before(c.suspended)
}
