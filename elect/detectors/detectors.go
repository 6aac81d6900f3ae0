// Package detectors names the weak leader elections a process can run
// (edictkv serve --detector, the simulator's comparisons): the default
// elect.LowestLive and the papers' algorithms of elect/bully,
// elect/stoller, elect/omega and elect/fetzer. (The memberlist detector,
// elect/gossip, needs a network of its own and is built by its user.)
//
// Every algorithm is built with timings for a network whose messages take
// at most MaxDelay, the same bound for all, so that they can be compared.
package detectors

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/elect/omega"
	"github.com/edictlog/edictlog/elect/stoller"
)

// Factory builds process id's detector for one start (incarnation counts
// starts from 1).
type Factory func(id edict.ProcessID, members []edict.ProcessID, incarnation uint64) elect.Detector

// Options are what every algorithm is tuned from.
type Options struct {
	// MaxDelay bounds a message's delay: δ, T or Δ in the papers' words.
	MaxDelay time.Duration
	// MaxLease is the lease protocol's longest lease (LowestLive's leader
	// hint lasts that long).
	MaxLease time.Duration
}

type entry struct {
	about string
	build func(o Options) Factory
}

var registry = map[string]entry{
	"lowest-live": {"the lowest-id member not suspected (Nerio §9; the library's default)", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, _ uint64) elect.Detector {
			d := elect.NewLowestLive(id, members, o.MaxLease)
			d.SuspectAfter = 2 * o.MaxLease
			return d
		}
	}},
	"bully": {"Garcia-Molina's Bully (the Souto slides)", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			return bully.NewBully(bully.Config{ID: id, Members: members, Incarnation: inc, T: o.MaxDelay})
		}
	}},
	"invitation": {"Garcia-Molina's Invitation (the Souto slides)", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			return bully.NewInvitation(bully.Config{ID: id, Members: members, Incarnation: inc, T: o.MaxDelay})
		}
	}},
	"omega-fig1":     {"Aguilera et al.'s Ω, Fig. 1", omegaFactory(omega.Fig1)},
	"omega-3stable":  {"Aguilera et al.'s 3-stable Ω, Fig. 2", omegaFactory(omega.Stable3)},
	"omega-6stable":  {"Aguilera et al.'s 6-stable Ω, Fig. 4", omegaFactory(omega.Stable6)},
	"omega-constant": {"Aguilera et al.'s Ω with constant election time, Figs. 4 and 5", omegaFactory(omega.ConstantTime)},
	"stoller-bully": {"Stoller's Bully with a failure detector (§4; its oracle detector)", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			return stoller.NewBully(stoller.Config{ID: id, Members: members, Incarnation: inc, Hold: o.MaxDelay})
		}
	}},
	"stoller-async": {"Stoller's Asynchronous Bully (§7) with the ping failure detector (§6)", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			return stoller.NewAsync(stoller.Config{ID: id, Members: members, Incarnation: inc, Hold: o.MaxDelay})
		}
	}},
	"fetzer": {"Fetzer and Cristian's local leader election", func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			return fetzer.New(fetzer.Config{ID: id, Members: members, Incarnation: inc})
		}
	}},
}

func omegaFactory(v omega.Variant) func(o Options) Factory {
	return func(o Options) Factory {
		return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Detector {
			d, err := omega.New(v, omega.Config{ID: id, Members: members, Incarnation: inc, Delta: o.MaxDelay})
			if err != nil {
				panic(fmt.Sprintf("detectors: %v: %v", v, err)) // fixed, valid parameters
			}
			return d
		}
	}
}

// Names lists the detectors, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// About describes a detector in a few words.
func About(name string) string { return registry[name].about }

// New returns the factory of the detector called name.
func New(name string, o Options) (Factory, error) {
	e, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown detector %q (known: %v)", name, Names())
	}
	if o.MaxDelay <= 0 || o.MaxLease <= 0 {
		return nil, fmt.Errorf("detectors: MaxDelay and MaxLease must be positive")
	}
	return e.build(o), nil
}
