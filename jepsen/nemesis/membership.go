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

	"github.com/edictlog/edictlog/jepsen/cluster"
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
//     runs;
//   - slow disk (member-slow-disk): the member the change is about (the one
//     removed or replaced, or the newcomer) has a slow disk — every durable
//     batch of its log 50–400 ms late, and in netns mode the kernel's I/O
//     throttle — and is SIGKILLed and restarted at once at random moments:
//     within the slow fsync's reach of one of the change's admin requests,
//     and while a snapshot is streamed to it or installed. Its memory runs
//     ahead of its disk there, and a crash must lose nothing it promised.
//     The same nemesis also catches a member up by snapshot (catch-up):
//     killed while its disk is slow, kept down until the leader has
//     compacted its log past it, restarted, and killed again during the
//     install.
//
// The kill or transfer goes with one of the change's admin requests,
// picked at random (add learner, promote, remove), within companionWithin
// of its start: while that request is being committed.
//
// Every configuration a change asks for (the promotion of an add, a
// removal) must keep a quorum among the members live when it is asked for:
// not killed, not paused, not a process that could not start, not the
// member cut off or to be killed by the change's companion. A change that
// would not is not asked for: another victim is chosen, or the fault is
// skipped ("skipped: ... would leave N of M live"); one found so at a step
// ends there, skipped. A change the server refuses ends "refused ...":
// the server's answer, recorded, not a failure of the nemesis.
//
// The cluster keeps between minMembers and maxMembers members: an add at
// maxMembers becomes a removal, a removal at minMembers an add, removing
// the leader at minMembers replaces it, and a rejoin at minMembers becomes
// an add. (A replacement at maxMembers has one more member for the moment
// between its promotion and its removal.)
//
// Each step is recorded as an event of the nemesis; the last one of a
// change begins "completed ", "failed ", "skipped " or "refused " (see
// CountMembership).
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
	// changeCatchUp changes no membership: a member (the slow-disk
	// companion's) is caught up by a snapshot after it was down.
	changeCatchUp = "catch-up"
)

// What runs with a change.
const (
	withNothing   = ""
	withPartition = "partition"
	withKill      = "kill"
	withTransfer  = "transfer"
	withSlowDisk  = "slow-disk"
)

// plan is one membership fault: a change, and what runs with it.
type plan struct{ change, with string }

// membershipRotation is --nemesis membership: every change and every
// companion in turn, all of them within the first eight (a 90 s run
// reaches about ten), with changes under a partition in the shapes that
// once lost the leader for good: two back to back at five members (the member cut
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
	"member-slow-disk": {{changeAdd, withSlowDisk}, {changeReplace, withSlowDisk}, {changeCatchUp, withSlowDisk},
		{changeRemove, withSlowDisk}},
}

// IsMembership reports whether --nemesis name is a membership nemesis.
func IsMembership(name string) bool { return membershipFaults[name] != nil }

// InstallsSnapshots reports whether --nemesis name catches members up by
// snapshot: the run then compacts the log often (--snapshot-every).
func InstallsSnapshots(name string) bool {
	return name == "snapshot-install" || name == "member-slow-disk"
}

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
	failed     bool // failed, skipped or refused: Stop cleans up
	result     string

	// The slow-disk companion: whose disk is slow (the victim, or the
	// newcomer once started), and its kills.
	slowJoiner bool // the newcomer's, when it starts
	slow       *slowMember
}

func (m *membership) Name() string { return m.name }

func (m *membership) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	// Nothing of the last change is left for Stop to undo.
	*m = membership{name: m.name, plans: m.plans, n: m.n, kills: m.kills, cuts: m.cuts}
	l, err := waitLeader(ctx, c)
	if err != nil {
		return "", err
	}
	ids := c.Members()
	p, note := m.plans[m.n%len(m.plans)].fit(len(ids))
	m.n++
	m.cur, m.note, m.leader = p, note, l
	live := c.Live()
	nonLeader := shuffled(rng, slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == l }))
	if len(nonLeader) < 2 {
		return "", fmt.Errorf("a membership change needs %d members, not %v", minMembers, ids)
	}
	// The first victim (in random order) whose change keeps a quorum live
	// in every configuration it asks for.
	var refusal string
	chosen := false
	for i := range nonLeader {
		if m.pick(ids, live, nonLeader, i) {
			if why := m.quorumRefusal(ids, live); why == "" {
				chosen = true
				break
			} else if refusal == "" {
				refusal = m.describe() + ": " + why
			}
		}
		if !needsVictim(p.change) {
			break
		}
	}
	if !chosen {
		if refusal == "" {
			refusal = fmt.Sprintf("%s: no live member to change or to go with it (members %v, live %v)", m.cur.change, ids, live)
		}
		m.victim, m.cut, m.kill, m.transferTo = 0, 0, 0, 0
		return "", skip("%s", refusal)
	}
	switch p.with {
	case withPartition:
		m.cuts++
		rest := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == m.cut })
		if err := c.Block(groups(ids, []int{m.cut}, rest)); err != nil {
			return "", err // Stop heals it
		}
	case withKill:
		m.kills++
	case withSlowDisk:
		m.slow = &slowMember{c: c, rng: rand.New(rand.NewPCG(rng.Uint64(), 0x736c6f77))}
		if p.change == changeAdd {
			m.slowJoiner = true
		} else if desc, err := m.slow.slowDown(m.victim); err != nil {
			return "", err // Stop lifts it
		} else {
			return m.describe() + "; " + desc, nil
		}
	}
	return m.describe(), nil
}

// needsVictim reports whether a change is about a member other than the
// newcomer: one removed, replaced, rejoined or caught up.
func needsVictim(change string) bool {
	switch change {
	case changeRemove, changeReplace, changeRejoin, changeCatchUp:
		return true
	}
	return false
}

// pick chooses the change's victim (others[i], for the changes that have
// one) and its companion from the other live members, and reports whether
// it could. Members that do not run may be removed or replaced, but a
// rejoin's or a slow disk's victim must run, and so must a companion.
func (m *membership) pick(ids, live, others []int, i int) bool {
	m.victim, m.cut, m.kill, m.transferTo = 0, 0, 0, 0
	rest := others
	switch m.cur.change {
	case changeRemove, changeReplace, changeRejoin, changeCatchUp:
		m.victim = others[i]
		rest = slices.Delete(slices.Clone(others), i, i+1)
		if (m.cur.change == changeRejoin || m.cur.with == withSlowDisk) && !slices.Contains(live, m.victim) {
			return false
		}
	case changeRemoveLeader, changeReplaceLeader:
		m.victim = m.leader
	}
	restLive := slices.DeleteFunc(slices.Clone(rest), func(id int) bool { return !slices.Contains(live, id) })
	switch m.cur.with {
	case withPartition:
		if len(restLive) == 0 {
			return false
		}
		m.cut = restLive[0]
		if m.cuts%2 == 1 {
			m.cut = slices.Min(restLive)
		}
	case withKill:
		if len(restLive) == 0 {
			return false
		}
		m.kill = restLive[0]
		if m.kills%2 == 1 && m.victim != m.leader {
			m.kill = m.leader
		}
	case withTransfer:
		if len(restLive) == 0 {
			return false
		}
		m.transferTo = restLive[0]
	}
	return true
}

// newcomer stands for the process a change will start, in the
// configurations quorumRefusal checks.
const newcomer = -1

// configs lists the configurations the change in force asks for, in
// order, from members ids; newcomer stands for the process it starts (a
// rejoined victim comes back as one). A catch-up asks for none, but takes
// its member down: its configuration is the members'.
func (m *membership) configs(ids []int) [][]int {
	without := func(xs []int, out int) []int {
		return slices.DeleteFunc(slices.Clone(xs), func(id int) bool { return id == out })
	}
	plus := append(slices.Clone(ids), newcomer)
	switch m.cur.change {
	case changeAdd:
		return [][]int{plus}
	case changeRemove, changeRemoveLeader:
		return [][]int{without(ids, m.victim)}
	case changeReplace, changeReplaceLeader:
		return [][]int{plus, without(plus, m.victim)}
	case changeRejoin:
		return [][]int{without(ids, m.victim), without(plus, m.victim)}
	}
	return [][]int{ids}
}

// down are the processes the change's companion takes out while it runs:
// the member cut off, the one to be killed, the one whose disk is slow
// (killed at random moments; newcomer for the newcomer's).
func (m *membership) down() []int {
	var out []int
	for _, id := range []int{m.cut, m.kill} {
		if id != 0 {
			out = append(out, id)
		}
	}
	if m.cur.with == withSlowDisk {
		if m.slowJoiner {
			out = append(out, newcomer)
		} else {
			out = append(out, m.victim)
		}
	}
	return out
}

// quorumRefusal says why the change in force, with its companion, would
// leave a configuration it asks for without a quorum of live members;
// "" if it would not. live are the processes that run now; the newcomer
// counts as live unless the companion takes it down.
func (m *membership) quorumRefusal(ids, live []int) string {
	live = append(slices.Clone(live), newcomer)
	for _, config := range m.configs(ids) {
		if why := quorumLive(config, live, m.down()); why != "" {
			return why
		}
	}
	return ""
}

// quorumLive says why config would have no quorum (a majority) among
// live minus down; "" if it would.
func quorumLive(config, live, down []int) string {
	n := 0
	for _, id := range config {
		if slices.Contains(live, id) && !slices.Contains(down, id) {
			n++
		}
	}
	if q := len(config)/2 + 1; n < q {
		var alive []int
		for _, id := range live {
			if id != newcomer && !slices.Contains(down, id) {
				alive = append(alive, id)
			}
		}
		slices.Sort(alive)
		return fmt.Sprintf("would leave %d of %d live (quorum %d) in configuration %s; live: %v",
			n, len(config), q, configString(config), alive)
	}
	return ""
}

func configString(config []int) string {
	var parts []string
	for _, id := range config {
		if id == newcomer {
			parts = append(parts, "new")
		} else {
			parts = append(parts, fmt.Sprint(id))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// stepRefusal checks, before an admin request, that config keeps a quorum
// among the processes live now, the companion's excepted.
func (m *membership) stepRefusal(c Cluster, what string, config []int) error {
	down := m.down()
	if m.slow != nil {
		if id := m.slow.target(); id != 0 {
			down = append(down, id)
		}
	}
	if why := quorumLive(config, c.Live(), down); why != "" {
		return skip("%s %s", what, why)
	}
	return nil
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
	case changeCatchUp:
		what = fmt.Sprintf("catch %d up by snapshot (down until the log is compacted past it, then restarted)", m.victim)
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
	case withSlowDisk:
		whose := fmt.Sprintf("%d's", m.victim)
		if m.slowJoiner {
			whose = "the newcomer's"
		}
		what += " with " + whose + " disk slow, killed and restarted at random moments (during the change, during snapshot installs to it)"
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
	var companion func(during string)
	within := companionWithin
	switch {
	case m.kill != 0:
		companion = func(string) {
			err := c.Kill(m.kill)
			m.killed = err == nil
			step("killed %d during the change at +%dms: %v", m.kill, ms(), errString(err))
		}
	case m.transferTo != 0:
		companion = func(string) {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.Transfer(tctx, m.transferTo)
			cancel()
			step("transfer → %d during the change at +%dms: %v", m.transferTo, ms(), errString(err))
		}
	case m.slow != nil:
		m.slow.step, m.slow.ms = step, ms
		companion = func(during string) { m.slow.killAndRestart(during) }
		// Within the reach of the slowest fsync after the request:
		// while the request's entries wait for the slow disk.
		within = time.Duration(slowDiskSpec.MaxMS) * time.Millisecond
		if !m.slowJoiner {
			m.slow.watch(ctx)
		}
	}
	h := &withCompanion{Cluster: c, fire: companion, at: -1}
	if m.slowJoiner {
		h.started = func(id int) {
			desc, err := m.slow.slowDown(id)
			step("%d's disk slow from its start at +%dms: %s", id, ms(), errString(err))
			if desc != "" {
				step("%s", desc)
			}
			m.slow.watch(ctx)
		}
	}
	if n := adminRequests[m.cur.change]; companion != nil && n > 0 {
		h.at = rng.IntN(n)
		h.delay = time.Duration(rng.Int64N(int64(within)))
	}
	err := m.change(ctx, h, step, ms)
	var sk *skipError
	switch {
	case err == nil:
	case errors.As(err, &sk):
		m.failed = true
		m.result = fmt.Sprintf("skipped %s: %s", m.cur.change, sk.why)
	case errors.Is(err, ErrRefused):
		m.failed = true
		m.result = fmt.Sprintf("refused %s: %s", m.cur.change, errString(err))
	default:
		m.failed = true
		m.result = fmt.Sprintf("failed %s: %s", m.cur.change, errString(err))
	}
	step("%s at +%dms", m.result, ms())
	if !h.wait() && companion != nil && m.slow == nil {
		companion("") // the change ended before its request came
	}
	if m.slow != nil {
		m.slow.stopWatching()
	}
}

// adminRequests is how many admin requests each change makes (rejoin
// runs alone; a catch-up makes none).
var adminRequests = map[string]int{changeAdd: 2, changeRemove: 1, changeRemoveLeader: 1, changeReplace: 3, changeReplaceLeader: 3, changeRejoin: 3}

// withCompanion is the cluster as a change sees it: the at-th admin
// request (AddLearner, Promote, Remove) also starts fire, delay after it,
// and started, if set, is told of the process StartJoiner started.
type withCompanion struct {
	Cluster
	fire    func(during string)
	started func(id int)
	at, n   int
	delay   time.Duration
	wg      sync.WaitGroup
	fired   bool
}

// fireNow runs fire at once, and waits for it, if the next request is the
// at-th: for a kill of the process the request removes, which would never
// be followed by a start if it came during the removal.
func (w *withCompanion) fireNow(what string) {
	if w.fire != nil && w.n == w.at {
		w.fired = true
		fire := w.fire
		w.fire = nil
		fire("just before the request to " + what)
	}
}

func (w *withCompanion) before(what string) {
	if w.fire != nil && w.n == w.at {
		w.fired = true
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			time.Sleep(w.delay)
			w.fire(fmt.Sprintf("%v after the request to %s", w.delay.Round(time.Millisecond), what))
		}()
	}
	w.n++
}

// wait waits for the companion and reports whether it ran.
func (w *withCompanion) wait() bool {
	w.wg.Wait()
	return w.fired
}

func (w *withCompanion) StartJoiner(ctx context.Context) (int, error) {
	id, err := w.Cluster.StartJoiner(ctx)
	if err == nil && id != 0 && w.started != nil {
		w.started(id)
	}
	return id, err
}

func (w *withCompanion) AddLearner(ctx context.Context, id int) error {
	w.before(fmt.Sprintf("add learner %d", id))
	return w.Cluster.AddLearner(ctx, id)
}

func (w *withCompanion) Promote(ctx context.Context, id int) error {
	w.before(fmt.Sprintf("promote %d", id))
	return w.Cluster.Promote(ctx, id)
}

func (w *withCompanion) Remove(ctx context.Context, id int) error {
	w.before(fmt.Sprintf("remove %d", id))
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
	case changeCatchUp:
		if err := m.catchUp(ctx, c, step, ms); err != nil {
			return err
		}
		m.result = fmt.Sprintf("completed catch-up of %d by snapshot (%s)", m.victim, m.slow.killsString())
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

// promote adds id as a learner and promotes it, if the configuration with
// it keeps a quorum live.
func (m *membership) promote(ctx context.Context, c Cluster, id int, step func(string, ...any), ms func() int64) error {
	if err := c.AddLearner(ctx, id); err != nil {
		return fmt.Errorf("add learner %d: %w", id, err)
	}
	step("%d a learner at +%dms", id, ms())
	config := append(slices.DeleteFunc(c.Members(), func(x int) bool { return x == id }), id)
	if err := m.stepRefusal(c, fmt.Sprintf("promote %d:", id), config); err != nil {
		return err
	}
	if err := c.Promote(ctx, id); err != nil {
		return fmt.Errorf("promote %d: %w", id, err)
	}
	m.joiner = 0 // a member now: nothing to clean up
	step("%d promoted, a member at +%dms", id, ms())
	return nil
}

// remove takes the victim out, if the configuration without it keeps a
// quorum live. A slow-disk victim may be killed while it is removed, but
// not restarted once removed.
func (m *membership) remove(ctx context.Context, c Cluster, step func(string, ...any), ms func() int64) error {
	config := slices.DeleteFunc(c.Members(), func(x int) bool { return x == m.victim })
	if err := m.stepRefusal(c, fmt.Sprintf("remove %d:", m.victim), config); err != nil {
		return err
	}
	slow := m.slow != nil && m.slow.target() == m.victim
	if slow {
		if w, ok := c.(*withCompanion); ok {
			w.fireNow(fmt.Sprintf("remove %d", m.victim))
		}
		m.slow.op.Lock()
		defer m.slow.op.Unlock()
	}
	if err := c.Remove(ctx, m.victim); err != nil {
		return fmt.Errorf("remove %d: %w", m.victim, err)
	}
	m.removed = true
	if slow {
		m.slow.mu.Lock()
		m.slow.gone = true
		m.slow.mu.Unlock()
	}
	step("removed %d at +%dms", m.victim, ms())
	return nil
}

// catchUp takes the slow-disk member down until the leader has compacted
// its log past the member's last entry, and restarts it: only a snapshot
// can catch it up, and its stream is held at it a while (its watcher
// kills it during the stream or the install). It waits until the member
// has caught up.
func (m *membership) catchUp(ctx context.Context, c Cluster, step func(string, ...any), ms func() int64) error {
	id := m.victim
	st, err := c.Status(ctx, id)
	if err != nil {
		return fmt.Errorf("status of %d: %w", id, err)
	}
	if err := m.stepRefusal(c, fmt.Sprintf("take %d down:", id), c.Members()); err != nil {
		return err
	}
	if err := m.slow.kill(); err != nil {
		return fmt.Errorf("kill %d: %w", id, err)
	}
	step("killed %d (last index %d) at +%dms", id, st.LastIndex, ms())
	// Every running member, not the leader alone: one that has not
	// compacted as far could lead by the restart and catch id up by
	// appends.
	compacted := false
	var first, holder int
	for end := time.Now().Add(compactionWait); time.Now().Before(end); {
		var err error
		if first, holder, err = lowestFirstIndex(ctx, c, id); err == nil && first > st.LastIndex+1 {
			compacted = true
			break
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	if compacted {
		step("every member compacted past %d at +%dms (the lowest first index %d, member %d)", id, ms(), first, holder)
	} else {
		step("the logs were not all compacted past %d within %v (the lowest first index %d, member %d): restarting it anyway", id, compactionWait, first, holder)
	}
	if err := c.SetDelay(id, cluster.Delay{SnapshotMS: snapshotHoldMS}); err != nil {
		return fmt.Errorf("hold snapshot streams to %d: %w", id, err)
	}
	if err := m.slow.restart("after the compaction"); err != nil {
		return err
	}
	// Caught up: it has applied what the leader had committed when it
	// came back. (A slow disk keeps it a batch or so behind the leader's
	// commit from then on.)
	target, applied, leader := 0, 0, 0
	for end := time.Now().Add(20 * time.Second); ; {
		if target == 0 {
			if l, err := c.Leader(ctx); err == nil {
				if lst, err := c.Status(ctx, l); err == nil && lst.Commit > 0 {
					target, leader = lst.Commit, l
				}
			}
		}
		if vst, err := c.Status(ctx, id); err == nil {
			applied = vst.Applied
		}
		if target > 0 && applied >= target && !m.slow.isDown() {
			step("%d caught up at +%dms: applied %d, leader %d's commit at its restart %d", id, ms(), applied, leader, target)
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%d did not catch up within 20s of its restart (applied %d, leader %d's commit at its restart %d)", id, applied, leader, target)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Stop heals the partition, restarts the killed member and lifts the slow
// disk. After a change that failed, was skipped or was refused it takes
// out a process the change started that did not become a member, and
// reads the members from the leader. A member whose disk was wiped but
// whose removal failed stays down: it cannot come back as the member it
// was.
func (m *membership) Stop(ctx context.Context, c Cluster) error {
	var errs []error
	if m.cut != 0 {
		errs = append(errs, c.Block(nil))
	}
	if m.killed {
		errs = append(errs, c.Restart(m.kill))
	}
	if m.slow != nil {
		m.slow.stopWatching()
		did, err := m.slow.heal()
		if did != "" {
			m.result += "; " + did
		}
		errs = append(errs, err)
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
	// CatchUps counts members caught up by snapshot after they were down
	// (member-slow-disk; no membership change).
	CatchUps int `json:"catch_ups,omitempty"`
	// Failed counts changes that did not complete, NotStarted membership
	// faults that could not start (no leader to ask, too few members).
	Failed     int `json:"failed"`
	NotStarted int `json:"not_started"`
	// Skipped counts changes not asked for because a configuration would
	// have had no quorum of live members (at the start or at a step);
	// Refused changes the server refused.
	Skipped int `json:"skipped"`
	Refused int `json:"refused"`
}

// String says what the counts are, for the run's summary.
func (m MembershipCounts) String() string {
	s := fmt.Sprintf("completed: %d replacements, %d adds, %d removes (%d of these took out the leader), %d rejoins after a lost disk",
		m.Replacements, m.Adds, m.Removes, m.LeaderRemovals, m.Rejoins)
	if m.CatchUps > 0 {
		s += fmt.Sprintf(", %d catch-ups by snapshot", m.CatchUps)
	}
	return s + fmt.Sprintf("; %d failed, %d not started, %d skipped (no live quorum), %d refused by the server",
		m.Failed, m.NotStarted, m.Skipped, m.Refused)
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
		case op.F == history.FStart && strings.HasPrefix(d, "skipped: "):
			m.Skipped++
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
		case strings.HasPrefix(d, "completed catch-up "):
			m.CatchUps++
		case strings.HasPrefix(d, "failed "):
			m.Failed++
		case strings.HasPrefix(d, "skipped "):
			m.Skipped++
		case strings.HasPrefix(d, "refused "):
			m.Refused++
		}
	}
	return m
}
