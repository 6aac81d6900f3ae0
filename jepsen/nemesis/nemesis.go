// Package nemesis injects the faults of a Jepsen-style test on a schedule
// and records each one's start and end in the history: network partitions
// of several shapes, crashes and restarts, pauses longer than a lease,
// clock-rate faults within and beyond the drift bound ρ, membership
// changes, and leadership transfers.
//
// Every fault is undone by its own stop, and Heal undoes whatever is left,
// so a test always ends with every node up, connected and at clock rate 1.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
)

// Cluster is what the nemesis needs from the cluster under test.
type Cluster interface {
	// Members are the ids of the current members (up or not).
	Members() []int
	// Block makes each node drop all traffic with the nodes listed for it
	// (and they with it); nil heals the network.
	Block(blocked map[int][]int) error
	Kill(id int) error
	Restart(id int) error
	Pause(id int) error
	Resume(id int) error
	SetClockRate(id int, rate float64) error
	Leader(ctx context.Context) (int, error)
	// Replace adds a new process as a learner, promotes it and removes
	// member old (stopping its process); it returns the new id.
	Replace(ctx context.Context, old int) (int, error)
	Transfer(ctx context.Context, to int) error
}

// Fault is one kind of fault.
type Fault interface {
	// Name is what --nemesis calls it.
	Name() string
	// Start injects the fault and describes what it did.
	Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error)
	// Stop undoes it.
	Stop(ctx context.Context, c Cluster) error
}

// Schedule runs faults one at a time: Quiet without a fault, then the next
// fault (round robin) for Hold, until ctx ends.
type Schedule struct {
	Faults      []Fault
	Quiet, Hold time.Duration
	Seed        uint64
	// Logf reports what happens (optional).
	Logf func(format string, args ...any)
}

// Run runs the schedule and undoes the last fault before returning.
func (s *Schedule) Run(ctx context.Context, c Cluster, rec *history.Recorder) error {
	rng := rand.New(rand.NewPCG(s.Seed, 0x6e656d))
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Quiet):
		}
		f := s.Faults[i%len(s.Faults)]
		detail, err := f.Start(ctx, c, rng)
		if err != nil {
			s.logf("nemesis %s: start failed: %v", f.Name(), err)
			rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: f.Name(), Detail: "failed: " + err.Error()})
			rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: f.Name()})
			continue
		}
		rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: f.Name(), Detail: detail})
		s.logf("nemesis %s: %s", f.Name(), detail)
		select {
		case <-ctx.Done():
		case <-time.After(s.Hold):
		}
		// Undo even when the test is over: it must end healed.
		err = f.Stop(context.WithoutCancel(ctx), c)
		stop := history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: f.Name()}
		if err != nil {
			stop.Detail = "stop failed: " + err.Error()
			s.logf("nemesis %s: stop failed: %v", f.Name(), err)
		}
		rec.Add(stop)
		if ctx.Err() != nil {
			return err
		}
	}
}

func (s *Schedule) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// ByName builds the faults --nemesis names; rho is the cluster's drift
// bound and lease its longest lease (pauses outlast it).
func ByName(names []string, rho float64, lease time.Duration) ([]Fault, error) {
	var out []Fault
	for _, n := range names {
		switch n {
		case "partition":
			out = append(out, &partition{})
		case "kill":
			out = append(out, &kill{})
		case "pause":
			out = append(out, &pause{lease: lease})
		case "clock":
			out = append(out, &clock{rho: rho})
		case "clock-beyond-rho":
			out = append(out, &clockBeyond{})
		case "membership":
			out = append(out, &membership{})
		case "transfer":
			out = append(out, &transfer{})
		default:
			return nil, fmt.Errorf("unknown nemesis %q (known: partition, kill, pause, clock, clock-beyond-rho, membership, transfer)", n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nemesis named")
	}
	return out, nil
}

// groups turns a partition into groups into what Block takes: every node
// blocks every node outside its group.
func groups(all []int, gs ...[]int) map[int][]int {
	where := map[int]int{}
	for i, g := range gs {
		for _, id := range g {
			where[id] = i
		}
	}
	out := map[int][]int{}
	for _, a := range all {
		for _, b := range all {
			ga, oka := where[a]
			gb, okb := where[b]
			if a != b && (!oka || !okb || ga != gb) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func shuffled(rng *rand.Rand, ids []int) []int {
	out := slices.Clone(ids)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
