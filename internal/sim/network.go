package sim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
)

// network delivers messages with the scenario's faults until GST and
// timely afterwards.
type network struct {
	w   *world
	sc  *Scenario
	gst int64
	// blocked[from][to] drops messages on that directed link.
	blocked map[edict.ProcessID]map[edict.ProcessID]bool
	// slow[from][to] is a real time before which nothing sent on that
	// directed link is delivered: a slow link that loses nothing.
	slow map[edict.ProcessID]map[edict.ProcessID]int64
	sent int
	lost int
	// changes counts every change of the network's faults (a link
	// blocked or slowed, a partition, a heal): a membership change's
	// gap bound holds only across a stretch with none (logGap).
	changes int
}

func (n *network) isBlocked(from, to edict.ProcessID) bool {
	return n.blocked[from][to]
}

// block drops every message on the directed link from → to until heal.
func (n *network) block(from, to edict.ProcessID) {
	n.changes++
	if n.blocked == nil {
		n.blocked = map[edict.ProcessID]map[edict.ProcessID]bool{}
	}
	if n.blocked[from] == nil {
		n.blocked[from] = map[edict.ProcessID]bool{}
	}
	n.blocked[from][to] = true
}

// split replaces the cut links with a partition into groups: every link
// between two groups is blocked both ways. A process in no group is
// alone.
func (n *network) split(all []edict.ProcessID, groups ...[]edict.ProcessID) {
	n.changes++
	side := map[edict.ProcessID]int{}
	for _, id := range all {
		side[id] = -int(id) // alone unless listed
	}
	for i, g := range groups {
		for _, id := range g {
			side[id] = i
		}
	}
	n.blocked = nil
	for _, a := range all {
		for _, b := range all {
			if side[a] != side[b] {
				n.block(a, b)
			}
		}
	}
}

// slowUntil delays every message sent on the directed link from → to
// until real time until at least, unless GST comes first.
func (n *network) slowUntil(from, to edict.ProcessID, until int64) {
	n.changes++
	if n.slow == nil {
		n.slow = map[edict.ProcessID]map[edict.ProcessID]int64{}
	}
	if n.slow[from] == nil {
		n.slow[from] = map[edict.ProcessID]int64{}
	}
	n.slow[from][to] = until
}

// partition splits the processes into the given side and the rest; oneWay
// blocks only messages leaving side.
func (n *network) partition(side []edict.ProcessID, all []edict.ProcessID, oneWay bool) {
	n.changes++
	in := map[edict.ProcessID]bool{}
	for _, p := range side {
		in[p] = true
	}
	n.blocked = map[edict.ProcessID]map[edict.ProcessID]bool{}
	for _, a := range all {
		n.blocked[a] = map[edict.ProcessID]bool{}
	}
	for _, a := range all {
		for _, b := range all {
			if in[a] != in[b] && (!oneWay || in[a]) {
				n.blocked[a][b] = true
			}
		}
	}
}

func (n *network) heal() { n.blocked = nil; n.changes++ }

// send schedules delivery of a message from one process to another.
func (n *network) send(from, to edict.ProcessID, deliver func()) {
	n.sent++
	if n.w.now >= n.gst {
		n.w.after(n.w.between(n.sc.MinDelay, n.sc.RoundTrip/2), deliver)
		return
	}
	if n.isBlocked(from, to) || n.w.chance(n.sc.Loss) {
		n.lost++
		return
	}
	copies := 1
	if n.w.chance(n.sc.Duplicate) {
		copies = 2
	}
	for range copies {
		d := n.w.between(n.sc.MinDelay, n.sc.MaxDelay)
		if n.w.chance(n.sc.LongDelay) {
			// A long delay reorders and lets stale requests arrive after
			// their sender moved on: the cases §10.2's sequencing is for.
			d += n.w.between(0, 3*n.sc.MaxLease())
		}
		if n.w.chance(n.sc.SpanDelay) {
			if long := d + n.w.between(time.Second, 5*time.Second); n.w.now+int64(long) < n.gst {
				d = long
			}
		}
		if until := n.slow[from][to]; n.w.now+int64(d) < until {
			d = time.Duration(until - n.w.now)
		}
		n.w.after(d, deliver)
	}
}

// MaxLease is the lease bound the scenario's cores run with.
func (sc *Scenario) MaxLease() time.Duration { return 2 * (sc.RoundTrip + sc.RenewInterval) }
