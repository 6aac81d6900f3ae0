// Package omegasim checks the Ω leader elections of elect/omega against
// their paper (Aguilera, Delporte-Gallet, Fauconnier, Toueg, "Stable
// Leader Election", DISC 2001) in the simulator's ProtocolRun: Ω (§3.1),
// communication efficiency (§3.2), k-stability (§3.3), the election time
// bounds, and §5's problem scenario 1, each with a negative control.
// Claims tabulates the paper against the measurements for N = 3, 5, 7, 9
// (docs/detectors.md).
//
// The scenarios make single links slow (§5's scenario 1) or lossy until
// GST with the simulator's own links: sim.ProtocolRun.Slow and Cut, and
// ProtocolConfig.Loss and GST.
package omegasim

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/omega"
	"github.com/edictlog/edictlog/internal/sim"
)

// factory adapts variant v to sim.ProtocolConfig.New: base supplies δ, η
// and the other timings; ID, Members and Incarnation come from the
// simulator. It panics on an invalid base, which is a programming error.
func factory(v omega.Variant, base omega.Config) func(edict.ProcessID, []edict.ProcessID, uint64) elect.Protocol {
	return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		c := base
		c.ID, c.Members, c.Incarnation = id, members, inc
		o, err := omega.New(v, c)
		if err != nil {
			panic(err)
		}
		return o
	}
}

// run is a simulation with the record the checkers need: when processes
// crashed and recovered, and which links were bad when (GST, goodFrom).
type run struct {
	sim   *sim.ProtocolRun
	delta time.Duration
	life  []lifeEvent
	// gst is when every link became good (§2); a process is accessible
	// from max(gst, its last start, goodFrom[p]).
	gst      time.Duration
	goodFrom map[edict.ProcessID]time.Duration
}

type lifeEvent struct {
	at time.Duration
	p  edict.ProcessID
	up bool
}

// newRun starts a simulation of v. A zero sc.MaxDelay is set to δ: the
// simulator's links then meet §6.1's expiring links once they are good.
func newRun(v omega.Variant, base omega.Config, sc sim.ProtocolConfig) *run {
	r := &run{delta: base.Delta, goodFrom: map[edict.ProcessID]time.Duration{}, gst: sc.GST}
	if sc.MaxDelay == 0 {
		sc.MaxDelay = base.Delta
	}
	sc.New = factory(v, base)
	r.sim = sim.NewProtocolRun(sc)
	return r
}

func (r *run) crash(ids ...edict.ProcessID) {
	for _, id := range ids {
		r.sim.Crash(id)
		r.life = append(r.life, lifeEvent{r.sim.Now(), id, false})
	}
}

func (r *run) recover(ids ...edict.ProcessID) {
	for _, id := range ids {
		r.sim.Recover(id)
		r.life = append(r.life, lifeEvent{r.sim.Now(), id, true})
	}
}

// leaders replays the run; see replay.
func (r *run) leaders() []point { return replay(r.sim.Members(), r.sim.Changes, r.life) }

// stability checks k-stability (§3.3) over the whole run.
func (r *run) stability(k int) []string {
	return stabilityViolations(r.leaders(), r.life, r.gst, r.goodFrom, time.Duration(k)*r.delta)
}

// omega checks that from on one live process was leader at every point.
func (r *run) omega(from time.Duration) error {
	return omegaHolds(r.leaders(), from, r.sim.Now())
}

// leaderNow is the agreed leader at the end of the run (None if none).
func (r *run) leaderNow() edict.ProcessID {
	l, ok := r.sim.Agreed()
	if !ok {
		return edict.None
	}
	return l
}

// ids is processes lo..hi.
func ids(lo, hi int) []edict.ProcessID {
	var out []edict.ProcessID
	for i := lo; i <= hi; i++ {
		out = append(out, edict.ProcessID(i))
	}
	return out
}

func (r *run) String() string { return fmt.Sprint(r.sim) }
