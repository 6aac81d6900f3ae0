package fetzer

import (
	"github.com/edictlog/edictlog/edict"
)

// This file is our stand-in for the fail-aware datagram service of [23]
// (§IV): it classifies each delivered message as fast or slow by an upper
// bound on its transmission delay, computed from a round trip, since the
// processes' clocks are not synchronised.
//
// Process q keeps, for each process p, the send stamp of the last message
// it received from p and its own clock when it received it. When q sends m
// to p it echoes that stamp A (a reading of p's clock) and the time Held
// it has kept it (on q's clock). When p receives m at D, the round trip
// (n, m) bounds m's delay:
//
//	delay(m) ≤ (D−A)(1+ρ) − Held(1−ρ) − δmin
//
// (the real time between p sending n and receiving m, less q's holding
// time and n's least delay). For connected processes (delays ≤ δ) the
// bound is at most 2δ − δmin plus 2ρ·Held, so Δ must exceed 2δ − δmin:
// with the simulator's δ = 5ms and δmin = 1ms, 9ms against Δ = 15ms.
//
// A message with no usable echo (none yet, or one from an earlier
// incarnation of the receiver) is slow: nothing bounds its delay.

// echo is what a process remembers of the last message from a peer.
type echo struct {
	stamp edict.Time // the peer's SentAt
	at    edict.Time // our clock when it arrived
}

// stampFor fills m's echo fields for destination to at now.
func (e *Elector) stampFor(m *Message, to edict.ProcessID, now edict.Time) {
	m.SentAt = now
	m.Echo, m.Held = edict.Time{}, 0
	if h, ok := e.heard[to]; ok {
		if held, ok := now.Sub(h.at); ok && held >= 0 {
			m.Echo, m.Held = h.stamp, int64(held)
		}
	}
}

// classify reports whether m, received at now, is fast, and remembers it
// for later echoes.
func (e *Elector) classify(now edict.Time, from edict.ProcessID, m *Message) bool {
	e.heard[from] = echo{stamp: m.SentAt, at: now}
	if m.Echo.IsZero() {
		return false
	}
	rt, ok := now.Sub(m.Echo)
	if !ok || rt < 0 {
		return false
	}
	r := e.cfg.Rho
	bound := float64(rt)*(1+r) - float64(m.Held)*(1-r) - float64(e.cfg.DeltaMin)
	return bound <= float64(e.cfg.Delta)
}
