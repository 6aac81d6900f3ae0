package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
)

// delay holds, duplicates and reorders the log messages edictkv processes
// receive, through the test-only fault hook in both modes: the kernel of
// the test machine has no netem qdisc, and user-space delay is the same in
// netns and portable mode. Holds span several leases (the default lease
// is 420 ms), so grant replies, appends and their replies of earlier
// attempts and reigns arrive after newer ones, and duplicates of them
// later still: the lease and log protocols must ignore what is stale, as
// they claim to without trusting the transport for order (docs/protocol.md, "Leases").
//
// It cycles through whose incoming messages are delayed: every member's;
// the leader's only (its granters' replies and acknowledgements come
// late, so its view of its quorum is old); the granters' only (the
// leader's requests and appends reach them late, after newer ones); every
// member's while leadership moves back and forth between two members every
// second or so, so that one process leads several reigns within the
// delay's window and a reply to its earlier reign's append or grant
// request can arrive during a later one; every member's while the leader
// is cut off until another process leads, then healed and given
// leadership back (twice), so that between its two reigns another one may
// have replaced entries it had sent but not committed.
type delay struct {
	lease   time.Duration
	every   time.Duration // between two transfers of the churn variant (0: churnEvery)
	n       int
	mode    delayMode
	targets []int
	summary string
}

// delayMode is whose messages are delayed, and what else happens.
type delayMode int

const (
	delayAll      delayMode = iota // every member's incoming messages
	delayLeader                    // the leader's only
	delayGranters                  // the others' only
	delayChurn                     // every member's, leadership transferred back and forth
	// delayRecur: every member's; the leader is cut off until another
	// leads, then healed and handed leadership back, twice, so that it
	// leads a reign after another process's reign that may have replaced
	// its uncommitted entries, within the delay's window.
	delayRecur
	numDelayModes
)

// churnTransfers is how many times leadership moves during a churn
// variant, one transfer every churnEvery.
const (
	churnTransfers = 4
	churnEvery     = time.Second
)

// delaySpec is what the issue asks for: 10% of messages held 0.5–3 s
// (one to seven leases), 2% duplicated, the copy up to 3 s late, and 10%
// held up to 20 ms so that the messages right behind overtake them.
var delaySpec = cluster.Delay{P: 0.10, MinMS: 500, MaxMS: 3000, Dup: 0.02, Reorder: 0.10, ReorderMS: 20}

func (d *delay) Name() string { return "delay" }

func (d *delay) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	d.targets = nil
	ids := c.Members()
	d.mode = delayMode(d.n % int(numDelayModes))
	var who string
	switch d.mode {
	case delayAll:
		d.targets, who = ids, "every member"
	case delayChurn:
		d.targets, who = ids, "every member, leadership moved back and forth meanwhile,"
	case delayRecur:
		d.targets, who = ids, "every member, the leader cut off for two leases and then handed leadership back, twice,"
	default:
		l, err := waitLeader(ctx, c)
		if err != nil {
			return "", err
		}
		if d.mode == delayLeader {
			d.targets, who = []int{l}, "the leader"
		} else {
			d.targets, who = slices.DeleteFunc(ids, func(id int) bool { return id == l }), "the granters of leader "+fmt.Sprint(l)
		}
	}
	d.n++
	var errs []error
	for _, id := range d.targets {
		errs = append(errs, c.SetDelay(id, delaySpec))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err // the schedule's Stop turns off what was set
	}
	s := delaySpec
	return fmt.Sprintf("delay messages into %s %v: %.0f%% held %d–%d ms, %.0f%% duplicated (the copy up to %d ms late), %.0f%% reordered (held ≤%d ms)",
		who, d.targets, 100*s.P, s.MinMS, s.MaxMS, 100*s.Dup, s.MaxMS, 100*s.Reorder, s.ReorderMS), nil
}

// Stop reads what each target's hook did (its counts start at each
// setting) and turns the delay off. Messages still held are delivered when
// due: a few seconds of stale arrivals after the stop are part of the
// fault.
// Script moves leadership in the churn variants.
func (d *delay) Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	switch d.mode {
	case delayChurn:
		d.churn(ctx, c, rng, step)
	case delayRecur:
		d.recur(ctx, c, step)
	}
}

// churn moves leadership from the leader to another member and back,
// churnTransfers times.
func (d *delay) churn(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	t0 := time.Now()
	a, err := waitLeader(ctx, c)
	if err != nil {
		step("no leader to move: %v", err)
		return
	}
	others := slices.DeleteFunc(c.Members(), func(id int) bool { return id == a })
	if len(others) == 0 {
		return
	}
	b := others[rng.IntN(len(others))]
	every := d.every
	if every == 0 {
		every = churnEvery
	}
	for i := range churnTransfers {
		if !sleepCtx(ctx, every) {
			return
		}
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		if l, err := c.Leader(ctx); err == nil && l == to {
			// The last transfer did not happen (edictkv answers a
			// transfer to the leader itself "not a member").
			step("%d already leads at +%dms: no transfer", to, time.Since(t0).Milliseconds())
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Transfer(tctx, to)
		cancel()
		step("transfer %d → %d at +%dms: %v", from, to, time.Since(t0).Milliseconds(), errString(err))
	}
}

// recur cuts the leader off until another member leads (at least two
// leases, at most recurWait), heals, and hands leadership back to it;
// twice.
func (d *delay) recur(ctx context.Context, c Cluster, step func(string, ...any)) {
	t0 := time.Now()
	ms := func() int64 { return time.Since(t0).Milliseconds() }
	a, err := waitLeader(ctx, c)
	if err != nil {
		step("no leader to cut off: %v", err)
		return
	}
	for range 2 {
		ids := c.Members()
		rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == a })
		if err := c.Block(groups(ids, []int{a}, rest)); err != nil {
			step("cut off %d: %v", a, err)
			return
		}
		step("cut off leader %d at +%dms", a, ms())
		if !sleepCtx(ctx, 2*d.lease) {
			return
		}
		b := 0
		for end := time.Now().Add(recurWait); b == 0 && time.Now().Before(end); {
			for _, id := range rest {
				if st, err := c.Status(ctx, id); err == nil && st.IsLeader {
					b = id
				}
			}
			if b == 0 && !sleepCtx(ctx, 50*time.Millisecond) {
				return
			}
		}
		if err := c.Block(nil); err != nil {
			step("heal: %v", err)
			return
		}
		if b == 0 {
			step("no other member led within %v; healed at +%dms", recurWait, ms())
			continue
		}
		step("%d leads the others; healed at +%dms", b, ms())
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Transfer(tctx, a)
		cancel()
		step("transfer %d → %d at +%dms: %v", b, a, ms(), errString(err))
	}
}

// recurWait bounds the wait for another leader while the leader is cut off.
const recurWait = 3 * time.Second

// sleepCtx sleeps for d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (d *delay) Stop(ctx context.Context, c Cluster) error {
	var held, dup, reord uint64
	var errs []error
	if d.mode == delayRecur {
		errs = append(errs, c.Block(nil)) // if the script ended early, or failed to heal
	}
	for _, id := range d.targets {
		if st, err := c.HookStats(ctx, id); err == nil {
			held, dup, reord = held+st.Held, dup+st.Duplicated, reord+st.Reordered
		}
		errs = append(errs, c.SetDelay(id, cluster.Delay{}))
	}
	d.summary = fmt.Sprintf("on %v: %d messages held, %d duplicated, %d reordered (counts of processes that did not restart meanwhile)",
		d.targets, held, dup, reord)
	d.targets = nil
	return errors.Join(errs...)
}

func (d *delay) Summary() string { return d.summary }
