package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
)

// The membership nemeses change who is a member under load, alone or
// together with another fault, and the cluster must keep a leader through
// every change (the availability checker holds it to that). Each fault is
// one change, run as a script while the fault is in force:
//
//   - add: a new process joins (--join), is added as a learner and
//     promoted once the leader accepts it (a new epoch).
//   - remove: a member that does not lead is removed (a new epoch) and its
//     process stopped.
//   - replace: add, then remove a member that does not lead.
//   - remove the leader: the leader commits the epoch that leaves it out,
//     and its process is stopped as soon as the removal is acknowledged.
//   - rejoin: a member that does not lead crashes and loses its disk
//     (SIGKILL, data directory wiped); the cluster removes it, and it comes
//     back on the same address with the same id as a new process that
//     joins, is added as a learner and promoted. (It must be removed
//     first: a member that forgot its log and its grants cannot be taken
//     back as the member it was.)
//
// and what else happens while the change runs:
//
//   - partition: a member other than the leader and the one changed is
//     cut off from everyone for the whole fault; every other time the
//     lowest-id such member, the one the default weak-leader election
//     (elect.LowestLive) names once the leader is gone, so that the new
//     epoch's members look to a process that may have missed the change;
//   - kill: a member other than the one changed (every other time the
//     leader) is SIGKILLed while the change runs, and restarted when the
//     fault ends;
//   - transfer: leadership is handed to another member while the change
//     runs.
//
// The kill or transfer goes with one of the change's admin requests,
// picked at random (add learner, promote, remove), within companionWithin
// of its start: while that request is being committed.
//
// The cluster keeps between minMembers and maxMembers members: an add at
// maxMembers becomes a removal, a removal at minMembers an add, removing
// the leader at minMembers replaces it, and a rejoin at minMembers becomes
// an add. (A replacement at maxMembers has one more member for the moment
// between its promotion and its removal.)
//
// Each step is recorded as an event of the nemesis; the last one of a
// change begins "completed " or "failed " (see CountMembership).
const (
	minMembers = 3
	maxMembers = 5
)

// changeTimeout bounds one membership change, its waits included.
const changeTimeout = 30 * time.Second

// companionWithin bounds when a change's kill or transfer comes after the
// start of the admin request it goes with (uniformly at random): within
// the tens of milliseconds the request takes to commit, while the epoch
// changes.
var companionWithin = 50 * time.Millisecond

// The changes.
const (
	changeAdd           = "add"
	changeRemove        = "remove"
	changeRemoveLeader  = "remove-leader"
	changeReplace       = "replace"
	changeReplaceLeader = "replace-leader" // remove-leader at minMembers
	changeRejoin        = "rejoin"
)

// What runs with a change.
const (
	withNothing   = ""
	withPartition = "partition"
	withKill      = "kill"
	withTransfer  = "transfer"
)

// plan is one membership fault: a change, and what runs with it.
type plan struct{ change, with string }

// membershipRotation is --nemesis membership: every change and every
// companion in turn, all of them within the first eight (a 90 s run
// reaches about ten), with changes under a partition in the shapes that
// lost issue 14's leader: two back to back at five members (the member cut
// off during the first may still be catching up when the second begins),
// and one at three, where the new epoch's quorum without the member cut
// off is the leader and the newcomer. From five members the sizes go
// 5 5 5 4 3 3 4 4 5 5 4 4 5, back to the start.
var membershipRotation = []plan{
	{changeReplace, withPartition},
	{changeReplace, withPartition},
	{changeRemoveLeader, withNothing},
	{changeRemove, withTransfer},
	{changeReplace, withPartition},
	{changeAdd, withKill},
	{changeRejoin, withNothing},
	{changeAdd, withPartition},
	{changeReplace, withNothing},
	{changeRemove, withPartition},
	{changeReplace, withKill},
	{changeAdd, withNothing},
}

// membershipFaults are the membership nemeses by name.
var membershipFaults = map[string][]plan{
	"membership":           membershipRotation,
	"member-add":           {{changeAdd, withNothing}},
	"member-remove":        {{changeRemove, withNothing}},
	"member-replace":       {{changeReplace, withNothing}},
	"member-remove-leader": {{changeRemoveLeader, withNothing}},
	"member-rejoin":        {{changeRejoin, withNothing}},
	"member-partition":     {{changeReplace, withPartition}, {changeRemove, withPartition}, {changeAdd, withPartition}},
	"member-kill":          {{changeRemove, withKill}, {changeAdd, withKill}, {changeReplace, withKill}},
	"member-transfer":      {{changeRemove, withTransfer}, {changeAdd, withTransfer}, {changeReplace, withTransfer}},
}

// IsMembership reports whether --nemesis name is a membership nemesis.
func IsMembership(name string) bool { return membershipFaults[name] != nil }

// fit keeps the cluster between minMembers and maxMembers members: it
// returns the plan to run with n members, and why it differs, if it does.
func (p plan) fit(n int) (plan, string) {
	switch {
	case p.change == changeAdd && n >= maxMembers:
		return plan{changeRemove, p.with}, fmt.Sprintf("a removal instead of an add at %d members", n)
	case p.change == changeRemove && n <= minMembers:
		return plan{changeAdd, p.with}, fmt.Sprintf("an add instead of a removal at %d members", n)
	case p.change == changeRemoveLeader && n <= minMembers:
		return plan{changeReplaceLeader, p.with}, fmt.Sprintf("the leader replaced, not removed, at %d members", n)
	case p.change == changeRejoin && n <= minMembers:
		return plan{changeAdd, p.with}, fmt.Sprintf("an add instead of a rejoin at %d members", n)
	}
	return p, ""
}

// membership is one membership nemesis: its plans in turn.
type membership struct {
	name  string
	plans []plan
	n     int
	kills int // kill plans so far: every other one kills the leader
	cuts  int // partition plans so far: every other one cuts the lowest id

	// The change in force.
	cur        plan
	note       string
	leader     int
	victim     int // removed, replaced or rejoined (0: none)
	cut        int // cut off (0: none)
	kill       int // killed during the change (0: none)
	transferTo int // leadership handed to it during the change (0: none)
	killed     bool
	joiner     int  // the process the change started (0: none)
	wiped      bool // the victim's disk is gone
	removed    bool // the victim is out
	failed     bool
	result     string
}

func (m *membership) Name() string { return m.name }

func (m *membership) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	l, err := waitLeader(ctx, c)
	if err != nil {
		return "", err
	}
	ids := c.Members()
	p, note := m.plans[m.n%len(m.plans)].fit(len(ids))
	m.n++
	*m = membership{name: m.name, plans: m.plans, n: m.n, kills: m.kills, cuts: m.cuts, cur: p, note: note, leader: l}
	others := shuffled(rng, slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == l }))
	if len(others) < 2 {
		return "", fmt.Errorf("a membership change needs %d members, not %v", minMembers, ids)
	}
	switch p.change {
	case changeRemove, changeReplace, changeRejoin:
		m.victim, others = others[0], others[1:]
	case changeRemoveLeader, changeReplaceLeader:
		m.victim = l
	}
	switch p.with {
	case withPartition:
		m.cut = others[0]
		if m.cuts%2 == 1 {
			m.cut = slices.Min(others)
		}
		m.cuts++
		rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == m.cut })
		if err := c.Block(groups(ids, []int{m.cut}, rest)); err != nil {
			return "", err
		}
	case withKill:
		m.kill = others[0]
		if m.kills%2 == 1 && m.victim != l {
			m.kill = l
		}
		m.kills++
	case withTransfer:
		m.transferTo = others[0]
	}
	return m.describe(), nil
}

// describe says what the change in force is to do.
func (m *membership) describe() string {
	var what string
	switch m.cur.change {
	case changeAdd:
		what = "add a member"
	case changeRemove:
		what = fmt.Sprintf("remove member %d", m.victim)
	case changeRemoveLeader:
		what = fmt.Sprintf("remove the leader %d", m.victim)
	case changeReplace:
		what = fmt.Sprintf("replace member %d", m.victim)
	case changeReplaceLeader:
		what = fmt.Sprintf("replace the leader %d", m.victim)
	case changeRejoin:
		what = fmt.Sprintf("rejoin %d with an empty disk (kill, wipe, remove, add back)", m.victim)
	}
	if m.cur.change != changeRemoveLeader && m.cur.change != changeReplaceLeader {
		what += fmt.Sprintf(" (leader %d)", m.leader)
	}
	switch m.cur.with {
	case withPartition:
		what += fmt.Sprintf(" while %d is cut off", m.cut)
	case withKill:
		what += fmt.Sprintf(" while %d is killed", m.kill)
		if m.kill == m.leader {
			what += " (the leader)"
		}
	case withTransfer:
		what += fmt.Sprintf(" while leadership moves %d → %d", m.leader, m.transferTo)
	}
	if m.note != "" {
		what += "; " + m.note
	}
	return what
}

func (m *membership) Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(string, ...any)) {
	// A change under way finishes even when the test's time is up: one
	// left half done would leave the cluster in a state no operator
	// would.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changeTimeout)
	defer cancel()
	t0 := time.Now()
	ms := func() int64 { return time.Since(t0).Milliseconds() }
	var companion func()
	switch {
	case m.kill != 0:
		companion = func() {
			err := c.Kill(m.kill)
			m.killed = err == nil
			step("killed %d during the change at +%dms: %v", m.kill, ms(), errString(err))
		}
	case m.transferTo != 0:
		companion = func() {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.Transfer(tctx, m.transferTo)
			cancel()
			step("transfer → %d during the change at +%dms: %v", m.transferTo, ms(), errString(err))
		}
	}
	h := &withCompanion{Cluster: c, fire: companion, at: -1}
	if companion != nil {
		h.at = rng.IntN(adminRequests[m.cur.change])
		h.delay = time.Duration(rng.Int64N(int64(companionWithin)))
	}
	err := m.change(ctx, h, step, ms)
	if err != nil {
		m.failed = true
		m.result = fmt.Sprintf("failed %s: %s", m.cur.change, errString(err))
	}
	step("%s at +%dms", m.result, ms())
	if !h.wait() && companion != nil {
		companion() // the change ended before its request came
	}
}

// adminRequests is how many admin requests each change makes (rejoin
// runs alone).
var adminRequests = map[string]int{changeAdd: 2, changeRemove: 1, changeRemoveLeader: 1, changeReplace: 3, changeReplaceLeader: 3, changeRejoin: 3}

// withCompanion is the cluster as a change sees it: the at-th admin
// request (AddLearner, Promote, Remove) also starts fire, delay after it.
type withCompanion struct {
	Cluster
	fire  func()
	at, n int
	delay time.Duration
	wg    sync.WaitGroup
	fired bool
}

func (w *withCompanion) before() {
	if w.fire != nil && w.n == w.at {
		w.fired = true
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			time.Sleep(w.delay)
			w.fire()
		}()
	}
	w.n++
}

// wait waits for the companion and reports whether it ran.
func (w *withCompanion) wait() bool {
	w.wg.Wait()
	return w.fired
}

func (w *withCompanion) AddLearner(ctx context.Context, id int) error {
	w.before()
	return w.Cluster.AddLearner(ctx, id)
}

func (w *withCompanion) Promote(ctx context.Context, id int) error {
	w.before()
	return w.Cluster.Promote(ctx, id)
}

func (w *withCompanion) Remove(ctx context.Context, id int) error {
	w.before()
	return w.Cluster.Remove(ctx, id)
}

// change makes the change, recording each step; on success m.result says
// what was done ("completed ...").
func (m *membership) change(ctx context.Context, c Cluster, step func(string, ...any), ms func() int64) error {
	switch m.cur.change {
	case changeAdd:
		id, err := m.add(ctx, c, step, ms)
		if err != nil {
			return err
		}
		m.result = fmt.Sprintf("completed add %d", id)
	case changeRemove, changeRemoveLeader:
		if err := m.remove(ctx, c, step, ms); err != nil {
			return err
		}
		m.result = fmt.Sprintf("completed remove %d", m.victim)
		if m.cur.change == changeRemoveLeader {
			m.result = fmt.Sprintf("completed remove leader %d", m.victim)
		}
	case changeReplace, changeReplaceLeader:
		id, err := m.add(ctx, c, step, ms)
		if err != nil {
			return err
		}
		if err := m.remove(ctx, c, step, ms); err != nil {
			return err
		}
		m.result = fmt.Sprintf("completed replace %d with %d", m.victim, id)
		if m.cur.change == changeReplaceLeader {
			m.result = fmt.Sprintf("completed replace leader %d with %d", m.victim, id)
		}
	case changeRejoin:
		if err := c.Kill(m.victim); err != nil {
			return fmt.Errorf("kill %d: %w", m.victim, err)
		}
		if err := c.Wipe(m.victim); err != nil {
			return fmt.Errorf("wipe %d: %w", m.victim, err)
		}
		m.wiped = true
		step("killed %d and wiped its disk at +%dms", m.victim, ms())
		if err := m.remove(ctx, c, step, ms); err != nil {
			return err
		}
		if err := c.Rejoin(ctx, m.victim); err != nil {
			return fmt.Errorf("restart %d to join: %w", m.victim, err)
		}
		m.joiner = m.victim
		step("%d started again, empty, to join at +%dms", m.victim, ms())
		if err := m.promote(ctx, c, m.victim, step, ms); err != nil {
			return err
		}
		m.result = fmt.Sprintf("completed rejoin %d (removed after losing its disk, added back empty)", m.victim)
	default:
		return fmt.Errorf("unknown change %q", m.cur.change)
	}
	return nil
}

// add starts a new process and makes it a member.
func (m *membership) add(ctx context.Context, c Cluster, step func(string, ...any), ms func() int64) (int, error) {
	id, err := c.StartJoiner(ctx)
	if id != 0 {
		m.joiner = id
	}
	if err != nil {
		return 0, fmt.Errorf("start a joining process: %w", err)
	}
	step("started %d to join at +%dms", id, ms())
	return id, m.promote(ctx, c, id, step, ms)
}

// promote adds id as a learner and promotes it.
func (m *membership) promote(ctx context.Context, c Cluster, id int, step func(string, ...any), ms func() int64) error {
	if err := c.AddLearner(ctx, id); err != nil {
		return fmt.Errorf("add learner %d: %w", id, err)
	}
	step("%d a learner at +%dms", id, ms())
	if err := c.Promote(ctx, id); err != nil {
		return fmt.Errorf("promote %d: %w", id, err)
	}
	m.joiner = 0 // a member now: nothing to clean up
	step("%d promoted, a member at +%dms", id, ms())
	return nil
}

// remove takes the victim out.
func (m *membership) remove(ctx context.Context, c Cluster, step func(string, ...any), ms func() int64) error {
	if err := c.Remove(ctx, m.victim); err != nil {
		return fmt.Errorf("remove %d: %w", m.victim, err)
	}
	m.removed = true
	step("removed %d at +%dms", m.victim, ms())
	return nil
}

// Stop heals the partition and restarts the killed member. After a
// failed change it takes out a process the change started that did not
// become a member, and reads the members from the leader. A member whose
// disk was wiped but whose removal failed stays down: it cannot come back
// as the member it was.
func (m *membership) Stop(ctx context.Context, c Cluster) error {
	var errs []error
	if m.cut != 0 {
		errs = append(errs, c.Block(nil))
	}
	if m.killed {
		errs = append(errs, c.Restart(m.kill))
	}
	if m.failed {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if m.joiner != 0 {
			if err := c.Remove(cctx, m.joiner); err != nil {
				m.result += fmt.Sprintf("; %d, started for the change, could not be removed: %s", m.joiner, errString(err))
			} else {
				m.result += fmt.Sprintf("; %d, started for the change, removed", m.joiner)
			}
		}
		if err := c.SyncMembers(cctx); err != nil {
			m.result += "; members unknown: " + errString(err)
		}
		if m.wiped && !m.removed {
			m.result += fmt.Sprintf("; %d lost its disk and stays down", m.victim)
		}
		m.result += fmt.Sprintf("; members now %v", c.Members())
	}
	return errors.Join(errs...)
}

func (m *membership) Summary() string { return m.result }

// MembershipCounts counts the membership changes of a history.
type MembershipCounts struct {
	// Replacements, Adds and Removes count the completed changes of each
	// kind; a removal of the leader counts as a remove, a replacement of
	// it as a replacement, and LeaderRemovals counts both again.
	Replacements   int `json:"replacements"`
	Adds           int `json:"adds"`
	Removes        int `json:"removes"`
	LeaderRemovals int `json:"leader_removals"`
	// Rejoins counts members that lost their disk, were removed and were
	// added back (counted in none of the above).
	Rejoins int `json:"rejoins"`
	// Failed counts changes that did not complete, NotStarted membership
	// faults that could not start (no leader to ask, too few members).
	Failed     int `json:"failed"`
	NotStarted int `json:"not_started"`
}

// String says what the counts are, for the run's summary.
func (m MembershipCounts) String() string {
	return fmt.Sprintf("completed: %d replacements, %d adds, %d removes (%d of these took out the leader), %d rejoins after a lost disk; %d failed, %d not started",
		m.Replacements, m.Adds, m.Removes, m.LeaderRemovals, m.Rejoins, m.Failed, m.NotStarted)
}

// CountMembership counts the membership nemeses' changes in a history
// from their events: the last step of each change begins "completed
// <change>" or "failed".
func CountMembership(ops []history.Op) MembershipCounts {
	var m MembershipCounts
	for _, op := range ops {
		if op.Process != history.NemesisProcess || !IsMembership(op.Nemesis) {
			continue
		}
		d := op.Detail
		switch {
		case op.F == history.FStart && strings.HasPrefix(d, "failed: "):
			m.NotStarted++
		case op.F != history.FEvent:
		case strings.HasPrefix(d, "completed add "):
			m.Adds++
		case strings.HasPrefix(d, "completed remove leader "):
			m.Removes++
			m.LeaderRemovals++
		case strings.HasPrefix(d, "completed remove "):
			m.Removes++
		case strings.HasPrefix(d, "completed replace leader "):
			m.Replacements++
			m.LeaderRemovals++
		case strings.HasPrefix(d, "completed replace "):
			m.Replacements++
		case strings.HasPrefix(d, "completed rejoin "):
			m.Rejoins++
		case strings.HasPrefix(d, "failed "):
			m.Failed++
		}
	}
	return m
}
