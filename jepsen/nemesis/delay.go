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
// they claim to without trusting the transport for order (DESIGN §4).
//
// It cycles through whose incoming messages are delayed: every member's;
// the leader's only (its granters' replies and acknowledgements come
// late, so its view of its quorum is old); the granters' only (the
// leader's requests and appends reach them late, after newer ones); every
// member's while leadership moves back and forth between two members every
// second or so, so that one process leads several reigns within the
// delay's window and a reply to its earlier reign's append or grant
// request can arrive during a later one.
type delay struct {
	every   time.Duration // between two transfers of the churn variant (0: churnEvery)
	n       int
	churn   bool
	targets []int
	summary string
}

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
	ids := c.Members()
	who := "every member"
	d.churn = d.n%4 == 3
	switch d.n % 4 {
	case 0, 3:
		d.targets = ids
		if d.churn {
			who = "every member, leadership moved back and forth meanwhile,"
		}
	case 1, 2:
		l, err := waitLeader(ctx, c)
		if err != nil {
			return "", err
		}
		if d.n%3 == 1 {
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
	s := delaySpec
	return fmt.Sprintf("delay messages into %s %v: %.0f%% held %d–%d ms, %.0f%% duplicated (the copy up to %d ms late), %.0f%% reordered (held ≤%d ms)",
		who, d.targets, 100*s.P, s.MinMS, s.MaxMS, 100*s.Dup, s.MaxMS, 100*s.Reorder, s.ReorderMS), errors.Join(errs...)
}

// Stop reads what each target's hook did (its counts start at each
// setting) and turns the delay off. Messages still held are delivered when
// due: a few seconds of stale arrivals after the stop are part of the
// fault.
// Script moves leadership in the churn variant: from the leader to another
// member and back, churnTransfers times.
func (d *delay) Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	if !d.churn {
		return
	}
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
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Transfer(tctx, to)
		cancel()
		step("transfer %d → %d at +%dms: %v", from, to, time.Since(t0).Milliseconds(), errString(err))
	}
}

func (d *delay) Stop(ctx context.Context, c Cluster) error {
	var held, dup, reord uint64
	var errs []error
	for _, id := range d.targets {
		if st, err := c.HookStats(ctx, id); err == nil {
			held, dup, reord = held+st.Held, dup+st.Duplicated, reord+st.Reordered
		}
		errs = append(errs, c.SetDelay(id, cluster.Delay{}))
	}
	d.summary = fmt.Sprintf("on %v: %d messages held, %d duplicated, %d reordered (counts of processes that did not restart meanwhile)",
		d.targets, held, dup, reord)
	return errors.Join(errs...)
}

func (d *delay) Summary() string { return d.summary }
