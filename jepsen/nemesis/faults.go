package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// partition cycles through the partition shapes: one node isolated, a
// majority and a minority, a ring of overlapping majorities (each node
// sees its two neighbours: no two nodes agree on who is connected), a
// bridge (two halves joined by one node that sees both), and the leader
// isolated.
type partition struct{ n int }

func (p *partition) Name() string { return "partition" }

func (p *partition) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	ids := shuffled(rng, c.Members())
	if len(ids) < 3 {
		return "", errors.New("a partition needs 3 members")
	}
	shape := p.n % 5
	p.n++
	var blocked map[int][]int
	var what string
	switch shape {
	case 0:
		blocked, what = groups(ids, ids[:1], ids[1:]), fmt.Sprintf("isolate %d", ids[0])
	case 1:
		m := len(ids)/2 + 1
		blocked, what = groups(ids, ids[:m], ids[m:]), fmt.Sprintf("majority %v | minority %v", ids[:m], ids[m:])
	case 2:
		blocked = map[int][]int{}
		for i, a := range ids {
			for j, b := range ids {
				d := (i - j + len(ids)) % len(ids)
				if d > 1 && d < len(ids)-1 {
					blocked[a] = append(blocked[a], b)
				}
			}
		}
		what = fmt.Sprintf("majorities ring %v", ids)
	case 3:
		h := len(ids) / 2
		bridge := ids[h]
		left, right := ids[:h], ids[h+1:]
		blocked = map[int][]int{}
		for _, a := range left {
			blocked[a] = append(blocked[a], right...)
		}
		for _, b := range right {
			blocked[b] = append(blocked[b], left...)
		}
		what = fmt.Sprintf("bridge %v - %d - %v", left, bridge, right)
	default:
		l, err := c.Leader(ctx)
		if err != nil {
			return "", err
		}
		rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == l })
		blocked, what = groups(ids, []int{l}, rest), fmt.Sprintf("isolate leader %d", l)
	}
	return what, c.Block(blocked)
}

func (p *partition) Stop(ctx context.Context, c Cluster) error { return c.Block(nil) }

// kill SIGKILLs one node, then a minority, then every node, and restarts
// them at stop. It aims at the members that run: a member already down (one
// that could not start) counts toward the minority, and is left alone.
type kill struct {
	n      int
	killed []int // the kills that worked: Stop restarts exactly these
}

func (k *kill) Name() string { return "kill" }

func (k *kill) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	k.killed = nil
	members := c.Members()
	live := liveOf(c, members)
	ids := shuffled(rng, live)
	var targets []int
	var note string
	switch k.n % 3 {
	case 0:
		targets = ids[:min(1, len(ids))]
	case 1:
		// A minority down in all: those down already count.
		down := len(members) - len(live)
		m := (len(members)-1)/2 - down
		if m <= 0 {
			k.n++
			return "", skip("kill a minority: %d of %d members are down already", down, len(members))
		}
		targets = ids[:min(m, len(ids))]
		if down > 0 {
			note = fmt.Sprintf(" (with %d of %d members down already)", down, len(members))
		}
	default:
		targets = ids
	}
	k.n++
	if len(targets) == 0 {
		return "", fmt.Errorf("no member runs (members %v)", members)
	}
	var errs []error
	for _, id := range targets {
		if err := c.Kill(id); err != nil {
			errs = append(errs, err)
		} else {
			k.killed = append(k.killed, id)
		}
	}
	if len(k.killed) == 0 {
		return "", errors.Join(errs...)
	}
	what := fmt.Sprintf("kill %v%s", k.killed, note)
	if err := errors.Join(errs...); err != nil {
		// The fault is in force for those it killed.
		what += "; not killed: " + errString(err)
	}
	return what, nil
}

// Stop restarts every process the fault killed, all at once (one that
// hangs at its start must not keep the others down), whichever fails; one
// that could not start is the product's failure (recorded by the
// cluster), and the stop says so.
func (k *kill) Stop(ctx context.Context, c Cluster) error {
	errs := make([]error, len(k.killed))
	var wg sync.WaitGroup
	for i, id := range k.killed {
		wg.Go(func() { errs[i] = c.Restart(id) })
	}
	wg.Wait()
	k.killed = nil
	return errors.Join(errs...)
}

// liveOf is those of ids that are live (Cluster.Live).
func liveOf(c Cluster, ids []int) []int {
	live := c.Live()
	return slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return !slices.Contains(live, id) })
}

// pause SIGSTOPs the leader, or another node (a granter), for longer than
// a lease: the leader's lease runs out while it cannot notice, and it must
// not act on it when it resumes.
type pause struct {
	lease  time.Duration
	n      int
	paused int
}

func (p *pause) Name() string { return "pause" }

func (p *pause) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	p.paused = 0
	l, err := c.Leader(ctx)
	if err != nil {
		return "", err
	}
	target := l
	what := "leader"
	if p.n%2 == 1 {
		others := slices.DeleteFunc(liveOf(c, c.Members()), func(id int) bool { return id == l })
		if len(others) == 0 {
			return "", errors.New("no live member but the leader to pause")
		}
		target, what = others[rng.IntN(len(others))], "granter"
	}
	p.n++
	if err := c.Pause(target); err != nil {
		return "", err
	}
	p.paused = target
	return fmt.Sprintf("pause %s %d (lease %v)", what, p.paused, p.lease), nil
}

func (p *pause) Stop(ctx context.Context, c Cluster) error {
	if p.paused == 0 {
		return nil
	}
	err := c.Resume(p.paused)
	p.paused = 0
	return err
}

// clock sets random clock rates within the drift bound ρ on every node:
// the protocol must stay safe.
type clock struct {
	rho   float64
	rated []int
}

func (k *clock) Name() string { return "clock" }

func (k *clock) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	k.rated = c.Members()
	rates := map[int]string{}
	var errs []error
	for _, id := range k.rated {
		r := 1 + k.rho*(2*rng.Float64()-1)*0.99
		rates[id] = fmt.Sprintf("%.5f", r)
		errs = append(errs, c.SetClockRate(id, r))
	}
	return fmt.Sprintf("clock rates within ρ=%g: %v", k.rho, rates), errors.Join(errs...)
}

func (k *clock) Stop(ctx context.Context, c Cluster) error {
	var errs []error
	for _, id := range k.rated {
		errs = append(errs, c.SetClockRate(id, 1))
	}
	return errors.Join(errs...)
}

// clockBeyond breaks the assumption lease reads rest on: the leader's
// clock runs at slowRate of real time while it is cut off from the
// others, so it believes in its lease long after the others have granted
// a new one. Lease reads at the old leader are then expected to be stale.
type clockBeyond struct{ leader int }

// slowRate stretches what is left of the old leader's lease fiftyfold:
// seconds of real time, long enough for a new leader to commit writes the
// old one's lease reads miss.
const slowRate = 0.02

func (k *clockBeyond) Name() string { return "clock-beyond-rho" }

func (k *clockBeyond) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	k.leader = 0
	l, err := c.Leader(ctx)
	if err != nil {
		return "", err
	}
	k.leader = l
	if err := c.SetClockRate(l, slowRate); err != nil {
		return "", err
	}
	ids := c.Members()
	rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == l })
	return fmt.Sprintf("leader %d clock at rate %g and isolated", l, slowRate), c.Block(groups(ids, []int{l}, rest))
}

func (k *clockBeyond) Stop(ctx context.Context, c Cluster) error {
	err := c.Block(nil)
	if k.leader != 0 {
		err = errors.Join(err, c.SetClockRate(k.leader, 1))
	}
	return err
}

// transfer hands leadership to a random other member under load.
type transfer struct{}

func (t *transfer) Name() string { return "transfer" }

func (t *transfer) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	l, err := c.Leader(ctx)
	if err != nil {
		return "", err
	}
	others := slices.DeleteFunc(liveOf(c, c.Members()), func(id int) bool { return id == l })
	if len(others) == 0 {
		return "", errors.New("no live member but the leader to transfer to")
	}
	to := others[rng.IntN(len(others))]
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fmt.Sprintf("transfer %d → %d", l, to), c.Transfer(ctx, to)
}

func (t *transfer) Stop(ctx context.Context, c Cluster) error { return nil }
