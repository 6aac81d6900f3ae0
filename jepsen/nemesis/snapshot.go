package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
)

// snapshotInstall makes the leader stream a snapshot to a member under
// load, again and again: it cuts a member that does not lead off from
// everyone while the clients write on, until every other member has
// compacted its log past that member's last entry (the test runs edictkv
// with a small --snapshot-every so that this takes seconds), then heals,
// so that, whoever leads then, the only way to catch the member up is a snapshot. The member's hook holds
// each incoming stream for 0.75–1.5 s before its Node takes it, so that a
// leader change can happen while the stream is in flight, and the variants
// cycle: nothing more; transfer leadership away from the sender during the
// stream; isolate the sender during the stream (the stream, from a leader
// that has been deposed by the time it is installed, arrives late).
type snapshotInstall struct {
	n       int
	variant int
	victim  int
	before  snapCounts
	summary string
}

// snapshotHoldMS is the longest hold of an incoming stream at the member
// catching up: several leases, so that leadership can change meanwhile.
const snapshotHoldMS = 1500

// compactionWait bounds the wait for the leader to compact past the
// members: at a few hundred writes a second and --snapshot-every 128 it
// takes a few seconds (the log keeps 1024 entries behind a snapshot).
const compactionWait = 30 * time.Second

type snapCounts struct{ received, installed uint64 }

// counts sums the members' snapshot counts (streams the victim received,
// installs the senders saw confirmed).
func (s *snapshotInstall) counts(ctx context.Context, c Cluster) snapCounts {
	var out snapCounts
	for _, id := range c.Members() {
		st, err := c.HookStats(ctx, id)
		if err != nil {
			continue
		}
		out.installed += st.SnapshotsInstalled
		if id == s.victim {
			out.received = st.SnapshotsReceived
		}
	}
	return out
}

func (s *snapshotInstall) Name() string { return "snapshot-install" }

var snapshotVariants = []string{
	"nothing more",
	"transfer leadership away from the sender during the stream",
	"isolate the sender during the stream",
}

func (s *snapshotInstall) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	s.victim = 0
	l, err := waitLeader(ctx, c)
	if err != nil {
		return "", err
	}
	ids := c.Members()
	// A member that does not run cannot be caught up.
	others := slices.DeleteFunc(liveOf(c, ids), func(id int) bool { return id == l })
	if len(others) < 2 {
		return "", errors.New("a snapshot install needs 3 members")
	}
	s.victim = others[rng.IntN(len(others))]
	s.variant = s.n % len(snapshotVariants)
	s.n++
	s.before = s.counts(ctx, c)
	rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == s.victim })
	// On an error the schedule's Stop undoes both.
	if err := c.SetDelay(s.victim, cluster.Delay{SnapshotMS: snapshotHoldMS}); err != nil {
		return "", err
	}
	if err := c.Block(groups(ids, []int{s.victim}, rest)); err != nil {
		return "", err
	}
	return fmt.Sprintf("cut off %d (leader %d) until the log is compacted past it, then heal; streams to it held %d–%d ms; during the stream: %s",
		s.victim, l, snapshotHoldMS/2, snapshotHoldMS, snapshotVariants[s.variant]), nil
}

func (s *snapshotInstall) Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	t0 := time.Now()
	ms := func() int64 { return time.Since(t0).Milliseconds() }
	poll := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	// 1. Wait until no member's log holds the entries after the victim's
	// last one: not the leader's alone, for a member that has not
	// compacted as far could lead by the time the victim is healed (a
	// leader change under load, or the transfer variant) and catch it up
	// by appends, and no snapshot would be installed.
	var l int
	var vst cluster.Status
	var err error
	deadline := time.Now().Add(compactionWait)
	for {
		l, _ = c.Leader(ctx)
		var lowest, holder int
		vst, err = c.Status(ctx, s.victim)
		if err == nil {
			lowest, holder, err = lowestFirstIndex(ctx, c, s.victim)
		}
		if err == nil && lowest > vst.LastIndex+1 {
			step("every member compacted past %d at +%dms: the lowest first index %d (member %d), %d's last %d; leader %d",
				s.victim, ms(), lowest, holder, s.victim, vst.LastIndex, l)
			break
		}
		if time.Now().After(deadline) {
			step("the logs were not all compacted past %d within %v (lowest first index %d at member %d, %d's last %d, last error %v): healing anyway",
				s.victim, compactionWait, lowest, holder, s.victim, vst.LastIndex, errString(err))
			break
		}
		if !poll(100 * time.Millisecond) {
			return
		}
	}
	// 2. Heal, and watch the victim's hook for the stream.
	if err := c.Block(nil); err != nil {
		step("heal failed: %v", err)
		return
	}
	step("healed at +%dms", ms())
	seen := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		st, err := c.HookStats(ctx, s.victim)
		if err == nil && (st.SnapshotsHolding > 0 || st.SnapshotsReceived > s.before.received) {
			seen = true
			break
		}
		if !poll(10 * time.Millisecond) {
			return
		}
	}
	if !seen {
		step("no snapshot stream reached %d within 10s of the heal", s.victim)
	} else {
		sender, _ := c.Leader(ctx)
		step("a snapshot stream reached %d at +%dms (held there); leader %d", s.victim, ms(), sender)
		switch s.variant {
		case 1:
			cands := slices.DeleteFunc(c.Members(), func(id int) bool { return id == s.victim || id == sender })
			if sender != 0 && len(cands) > 0 {
				to := cands[rng.IntN(len(cands))]
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.Transfer(tctx, to)
				cancel()
				step("transfer %d → %d during the stream at +%dms: %v", sender, to, ms(), errString(err))
			}
		case 2:
			if sender != 0 {
				ids := c.Members()
				rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == sender })
				err := c.Block(groups(ids, []int{sender}, rest))
				step("isolate the sender %d during the stream at +%dms: %v", sender, ms(), errString(err))
			}
		}
	}
	// 3. Wait for the victim to catch up with the (possibly new) leader.
	var lst cluster.Status
	for end := time.Now().Add(20 * time.Second); ; {
		var err error
		if l, err = c.Leader(ctx); err == nil {
			lst, err = c.Status(ctx, l)
		}
		if err == nil {
			vst, err = c.Status(ctx, s.victim)
		}
		if err == nil && vst.Applied >= lst.Commit && lst.Commit > 0 {
			now := s.counts(ctx, c)
			step("%d caught up with leader %d at +%dms (applied %d); streams it received: %d, installs senders saw confirmed: %d",
				s.victim, l, ms(), vst.Applied, now.received-min(now.received, s.before.received), now.installed-min(now.installed, s.before.installed))
			return
		}
		if time.Now().After(end) {
			step("%d did not catch up within 20s of the stream (its applied %d, leader %d commit %d)", s.victim, vst.Applied, l, lst.Commit)
			return
		}
		if !poll(100 * time.Millisecond) {
			return
		}
	}
}

// errString is err on one line, "ok" if nil.
func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func (s *snapshotInstall) Stop(ctx context.Context, c Cluster) error {
	if s.victim == 0 {
		s.summary = "nothing to undo"
		return c.Block(nil)
	}
	err := errors.Join(c.Block(nil), c.SetDelay(s.victim, cluster.Delay{}))
	now := s.counts(ctx, c)
	s.summary = fmt.Sprintf("%d received %d snapshot stream(s); senders saw %d install(s) confirmed",
		s.victim, now.received-min(now.received, s.before.received), now.installed-min(now.installed, s.before.installed))
	return err
}

func (s *snapshotInstall) Summary() string { return s.summary }

// lowestFirstIndex is the lowest first index of the logs of the running
// members other than except, and the member that holds it: the oldest
// entry a leader could still send by append, whoever leads next.
func lowestFirstIndex(ctx context.Context, c Cluster, except int) (first, holder int, err error) {
	for _, id := range liveOf(c, c.Members()) {
		if id == except {
			continue
		}
		st, err := c.Status(ctx, id)
		if err != nil {
			return 0, 0, fmt.Errorf("status of %d: %w", id, err)
		}
		if holder == 0 || st.FirstIndex < first {
			first, holder = st.FirstIndex, id
		}
	}
	if holder == 0 {
		return 0, 0, errors.New("no running member but the victim")
	}
	return first, holder, nil
}
