package omega

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/detsim"
)

// Factory adapts variant v to detsim.Config.New: base supplies δ, η and
// the other timings; ID, Members and Incarnation come from the simulator.
// It panics on an invalid base, which is a programming error.
func Factory(v Variant, base Config) func(edict.ProcessID, []edict.ProcessID, uint64) elect.Protocol {
	return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		c := base
		c.ID, c.Members, c.Incarnation = id, members, inc
		o, err := New(v, c)
		if err != nil {
			panic(err)
		}
		return o
	}
}

// run is a simulation with the record the checkers need: when processes
// crashed and recovered, and which links were bad when (rules, GST).
type run struct {
	sim   *detsim.Sim
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

// newRun starts a simulation of v whose receivers apply rules. A zero
// sc.MaxDelay is set to δ: detsim then meets §6.1's expiring links.
func newRun(v Variant, base Config, sc detsim.Config, rules []rule) *run {
	r := &run{delta: base.Delta, goodFrom: map[edict.ProcessID]time.Duration{}}
	if sc.MaxDelay == 0 {
		sc.MaxDelay = base.Delta
	}
	inner := Factory(v, base)
	sc.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		p := inner(id, members, inc)
		if len(rules) == 0 {
			return p
		}
		return &shim{inner: p, id: id, rules: rules, rng: rand.New(rand.NewPCG(sc.Seed, uint64(id)<<32|inc))}
	}
	r.sim = detsim.New(sc)
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
