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
	sent    int
	lost    int
}

func (n *network) isBlocked(from, to edict.ProcessID) bool {
	return n.blocked[from][to]
}

// partition splits the processes into the given side and the rest; oneWay
// blocks only messages leaving side.
func (n *network) partition(side []edict.ProcessID, all []edict.ProcessID, oneWay bool) {
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

func (n *network) heal() { n.blocked = nil }

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
		n.w.after(d, deliver)
	}
}

// MaxLease is the lease bound the scenario's cores run with.
func (sc *Scenario) MaxLease() time.Duration { return 2 * (sc.RoundTrip + sc.RenewInterval) }
