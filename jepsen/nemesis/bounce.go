package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// bounce kills and at once restarts the leader's granters — the members
// other than the leader that name it as leader — down for milliseconds,
// not seconds as under kill. A granter that restarts has forgotten whom it
// granted to and must not grant again for a lease (the restart
// quarantine); the leader keeps its lease only as long as the grants it
// already holds last. It cycles through: one granter; two granters in
// quick succession (the leader is left with a bare quorum of grants it got
// before); one granter twice within a lease (its second start happens
// while its first is still in quarantine, or even still starting); two
// granters, then the first again; one granter as the leader is cut off
// from everyone, so that the next reign starts while that granter is
// restarting or in quarantine (the leader is healed once another leads).
type bounce struct {
	lease   time.Duration
	n       int
	plan    []int           // the bounces to do, in order
	gaps    []time.Duration // the wait before each bounce of plan
	isolate bool            // cut the leader off with the first bounce
	leader  int
	bounced []int
}

func (b *bounce) Name() string { return "bounce" }

func (b *bounce) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	b.plan, b.gaps, b.isolate, b.bounced = nil, nil, false, nil
	l, err := waitLeader(ctx, c)
	if err != nil {
		return "", err
	}
	b.leader = l
	var granters []int
	for _, id := range c.Members() {
		if id == l {
			continue
		}
		if st, err := c.Status(ctx, id); err == nil && st.Leader == l {
			granters = append(granters, id)
		}
	}
	if len(granters) == 0 {
		return "", fmt.Errorf("no member names %d as leader", l)
	}
	g := shuffled(rng, granters)
	// within is a random time within half a lease: the next bounce comes
	// while the last one's process is starting or in quarantine.
	within := func() time.Duration { return time.Duration(rng.Int64N(int64(b.lease/2))) + time.Millisecond }
	var what string
	b.isolate = false
	switch v := b.n % 5; {
	case v == 4:
		b.plan, b.gaps, b.isolate, what = g[:1], []time.Duration{0}, true, "one granter as the leader is cut off,"
	case v == 0 || len(g) < 2 && v != 2:
		b.plan, b.gaps, what = g[:1], []time.Duration{0}, "one granter"
	case v == 1:
		b.plan, b.gaps, what = g[:2], []time.Duration{0, within()}, "two granters in quick succession"
	case v == 2:
		b.plan, b.gaps, what = []int{g[0], g[0]}, []time.Duration{0, within()}, "one granter twice within a lease"
	default:
		b.plan, b.gaps, what = []int{g[0], g[1], g[0]}, []time.Duration{0, within(), within()}, "two granters, then the first again"
	}
	b.n++
	b.bounced = nil
	waits := make([]int64, len(b.gaps))
	for i, g := range b.gaps {
		waits[i] = g.Milliseconds()
	}
	return fmt.Sprintf("bounce %s of leader %d: %v, waiting %v ms before each (lease %v)", what, l, b.plan, waits, b.lease), nil
}

func (b *bounce) Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	t0 := time.Now()
	for i, id := range b.plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.gaps[i]):
		}
		at := time.Since(t0)
		if i == 0 && b.isolate {
			ids := c.Members()
			rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == b.leader })
			err := c.Block(groups(ids, []int{b.leader}, rest))
			step("cut off leader %d at +%dms: %v", b.leader, at.Milliseconds(), errString(err))
		}
		down, err := c.Bounce(id)
		if err != nil {
			// A process killed but not started again is down: the
			// schedule's heal restarts it.
			step("bounce %d at +%dms failed: %v", id, at.Milliseconds(), err)
			continue
		}
		if !slices.Contains(b.bounced, id) {
			b.bounced = append(b.bounced, id)
		}
		step("bounced %d at +%dms: SIGKILL to exec in %.1fms", id, at.Milliseconds(), float64(down.Microseconds())/1000)
	}
	if b.isolate {
		// Heal once another member leads (its reign began while the
		// bounced granter was starting or in quarantine).
		other := 0
		for end := time.Now().Add(recurWait); other == 0 && time.Now().Before(end); {
			if l, err := c.Leader(ctx); err == nil && l != b.leader {
				other = l
			} else if !sleepCtx(ctx, 20*time.Millisecond) {
				return
			}
		}
		err := c.Block(nil)
		who := fmt.Sprintf("%d leads", other)
		if other == 0 {
			who = fmt.Sprintf("no other member led within %v", recurWait)
		}
		step("%s; healed at +%dms: %v", who, time.Since(t0).Milliseconds(), errString(err))
	}
	for _, id := range b.bounced {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := c.WaitUp(wctx, id)
		cancel()
		if err != nil {
			step("%d does not answer: %v", id, err)
			continue
		}
		step("%d answers HTTP again at +%dms", id, time.Since(t0).Milliseconds())
	}
	if l, err := c.Leader(ctx); err == nil {
		step("leader now %d (was %d)", l, b.leader)
	} else {
		step("no leader at +%dms (was %d): %v", time.Since(t0).Milliseconds(), b.leader, err)
	}
}

// Stop heals the cut and makes sure every bounced process is up: one whose
// new process exited or does not answer could not start, and the cluster
// records it so.
func (b *bounce) Stop(ctx context.Context, c Cluster) error {
	var errs []error
	if b.isolate {
		errs = append(errs, c.Block(nil)) // if the script ended early
	}
	for _, id := range b.bounced {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		errs = append(errs, c.WaitUp(wctx, id))
		cancel()
	}
	b.isolate, b.bounced = false, nil
	return errors.Join(errs...)
}
