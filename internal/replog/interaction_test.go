package replog

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// TestInteraction runs the scenario transcripts, after
// etcd-io/raft's interaction tests: each file of testdata/ is a story told
// in commands that drive Cores by hand (the tcluster of harness_test.go:
// one clock, one message queue, per-process stores), with what happened
// written under each command. The test replays every file and fails on the
// first command whose output differs.
//
//	go test ./internal/replog/ -run TestInteraction                      # replay them all
//	go test ./internal/replog/ -run TestInteraction/stale_append_reply   # one file
//	go test ./internal/replog/ -run TestInteraction -rewrite             # write the output anew
//
// After -rewrite, read the diff: the output is the story, and a rewrite
// accepts whatever the code does now. A transcript that guards a safety
// rule says so in its header, and fails with the rule switched off:
//
//	EDICT_MUTATE=reply-reign go test -tags edictmutate ./internal/replog/ -run TestInteraction/stale_append_reply
//
// Such a failure stops at the first command whose output differs; to read
// the mutated run to its end, run it with -rewrite on a copy of the file.
//
// The files' format and -rewrite are github.com/cockroachdb/datadriven's:
//
//	# a comment
//	command key=value key=(v1, v2) flag
//	----
//	output
//
// The commands (ids are process numbers; a list is 1,2,3 or (1, 2, 3)):
//
//	boot ids=1,2,3            a cluster of these processes, epoch 0
//	advance d=50ms            move the shared clock, nothing else
//	tick [id=|ids=]           let timers fire (every process that is up)
//	settle [d=] [step=] [until=p1:ready] [verbose]
//	                          step the clock (5ms), tick, deliver all; for d
//	                          (default 1s) or until the condition holds
//	                          (checked after every tick and delivery, so the
//	                          rest stays queued): pN:leads, pN:fetching,
//	                          pN:starting, pN:ready, pN:follows (leads no
//	                          reign); prints events, not messages, unless
//	                          verbose
//	deliver [filter]          deliver queued messages that match, and what
//	                          they make, until none match; others stay queued
//	stabilize                 deliver everything until the queue is empty
//	drop [filter]             lose queued messages that match
//	hold [filter]             set queued messages that match aside (#n)
//	release [idx=] [filter] [redirect=]
//	                          deliver held messages now, late (redirect: to
//	                          another process than they were sent to)
//	net drop|hold [filter]    from now on, lose or hold what matches
//	net clear                 the network delivers everything again
//	down ids= / up ids=       cut off (not ticked, messages lost) / back
//	crash id=                 stop a process (like down, until restart)
//	restart id=               restart from what the stores hold (crashing
//	                          first if it was up)
//	suspect at= ids=          tell at's detectors that ids are down
//	trust at= ids=            tell at's detectors that ids are up
//	campaign id=              start a lease attempt now
//	propose id= data=(a, b)   propose commands (each flushed at once)
//	add-learner|promote|remove id= target=
//	                          propose a membership change (flushed at once)
//	read id= rid= [level=follower|lease|stale]
//	compact id= [trailing=]   compact the log up to the applied index
//	snapshot-accept from= to= the leader's snapshot of its applied state
//	                          starts streaming to a follower
//	snapshot-sent from= to=   the leader learns the stream ended
//	snapshot-installed from= to=
//	                          the follower's install ends
//	suspend id=               the host is suspended (its clock misses it)
//	check-suspend id=         the runtime's check before an input
//	                          (Driver.Now): suspended since LeaseSince?
//	status|log|debug|lead [id=|ids=]
//	                          Core.Status, the log, Core.Debug, the reign
//	                          being led
//	queue / held / net        what is queued, held, ruled
//	check                     committed entries agree on every process
//
// A filter is from=, to=, kind= (transport.Kind names: lease, append,
// appendReply, fetch, fetchReply, readIndex, readIndexReply, timeoutNow)
// and last= (the last index an append carries, an append reply or fetch
// reply acknowledges), each optional, each a list.
//
// Output: one line per message delivered, dropped or held
// (transport.Message.String), indented beneath it what the receiver did
// (events, applied entries, reads), and Core.Debug lines on request.
// Reign stamps print as R1, R2, … in the order the driver first sees
// them, and readings as incarnation:time since the clock's origin (the
// harness's clock starts an hour in). Observing never moves the clock.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		d := &interaction{t: t}
		datadriven.RunTest(t, path, d.run)
	})
}

// interaction is one transcript's state: the cluster and the network
// between its processes.
type interaction struct {
	t     *testing.T
	c     *tcluster
	out   strings.Builder
	held  []heldMsg
	nHeld int
	rules []netRule
	// marks: how much of each process's events, reads, applied entries
	// and snapshot requests has been printed.
	marks map[edict.ProcessID]*mark
	// reigns names the reign stamps seen, in order.
	reigns []edict.Stamp
	// snaps are the snapshots streaming, by leader and follower.
	snaps map[[2]edict.ProcessID]wire.SnapshotHeader
	// suspended is the reading of each host's last suspend.
	suspended map[edict.ProcessID]edict.Time
	// readyAt is when each process last became leader, as the runtime
	// noticed it.
	readyAt map[edict.ProcessID]edict.Time
}

type mark struct{ events, reads, applied, snaps int }

type heldMsg struct {
	n int
	m wire.Message
}

type netRule struct {
	hold bool
	f    msgFilter
}

// msgFilter matches messages; an empty field matches anything.
type msgFilter struct {
	from, to []edict.ProcessID
	kinds    []wire.Kind
	last     []uint64
}

func (f msgFilter) match(m wire.Message) bool {
	if len(f.from) > 0 && !slices.Contains(f.from, m.From) || len(f.to) > 0 && !slices.Contains(f.to, m.To) ||
		len(f.kinds) > 0 && !slices.Contains(f.kinds, m.Kind()) {
		return false
	}
	if len(f.last) > 0 {
		last, ok := lastIndexOf(m)
		return ok && slices.Contains(f.last, last)
	}
	return true
}

func (f msgFilter) String() string {
	var parts []string
	if len(f.from) > 0 {
		parts = append(parts, fmt.Sprintf("from=%v", f.from))
	}
	if len(f.to) > 0 {
		parts = append(parts, fmt.Sprintf("to=%v", f.to))
	}
	if len(f.kinds) > 0 {
		parts = append(parts, fmt.Sprintf("kind=%v", f.kinds))
	}
	if len(f.last) > 0 {
		parts = append(parts, fmt.Sprintf("last=%v", f.last))
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, " ")
}

// lastIndexOf is the last index an append carries, or an append reply or
// fetch reply acknowledges.
func lastIndexOf(m wire.Message) (uint64, bool) {
	switch {
	case m.Append != nil:
		return m.Append.PrevIndex + uint64(len(m.Append.Entries)), true
	case m.AppendReply != nil:
		return m.AppendReply.LastIndex, true
	case m.FetchReply != nil:
		return m.FetchReply.LastIndex, true
	}
	return 0, false
}

func (d *interaction) run(t *testing.T, td *datadriven.TestData) string {
	d.out.Reset()
	if d.c == nil && td.Cmd != "boot" {
		td.Fatalf(t, "boot first")
	}
	switch td.Cmd {
	case "boot":
		d.boot(t, td)
	case "advance":
		d.c.advance(d.duration(t, td, "d", 0))
		d.printf("t=%s\n", d.clock())
	case "tick":
		for _, id := range d.targets(t, td, d.upIDs()) {
			d.guard(id, "", func() { d.c.tick(id) })
			d.report(id, "")
		}
	case "settle":
		d.settle(t, td)
	case "deliver":
		d.deliver(d.filter(t, td))
	case "stabilize":
		d.deliver(msgFilter{})
	case "drop", "hold":
		f := d.filter(t, td)
		n := len(d.c.queue)
		d.c.queue = slices.DeleteFunc(d.c.queue, func(m wire.Message) bool {
			if !f.match(m) {
				return false
			}
			if td.Cmd == "hold" {
				d.holdMsg(m)
			} else {
				d.printf("dropped: %v\n", m)
			}
			return true
		})
		if n == len(d.c.queue) {
			d.printf("nothing queued matches\n")
		}
	case "release":
		d.release(t, td)
	case "net":
		d.net(t, td)
	case "down", "up":
		for _, id := range d.ids(t, td, "ids") {
			d.c.down[id] = td.Cmd == "down"
		}
		d.printf("down: %v\n", d.downIDs())
	case "crash":
		ids := d.targets(t, td, nil)
		if len(ids) == 0 {
			td.Fatalf(t, "crash: id= missing")
		}
		for _, id := range ids {
			d.c.down[id] = true
			d.printf("p%d crashed\n", id)
		}
	case "restart":
		id := d.id(t, td, "id")
		d.c.boot(id, []wire.EpochConfig{d.c.epoch0})
		d.mark(id).applied = 0
		d.printf("p%d restarted: incarnation %d, quarantined=%t\n", id, d.c.inc[id], d.c.cores[id].el.Quarantined(d.peek(id)))
		d.report(id, "")
	case "suspect", "trust":
		kind := elect.ProcessDown
		if td.Cmd == "trust" {
			kind = elect.ProcessUp
		}
		at, ids := d.ids(t, td, "at"), d.ids(t, td, "ids")
		for _, a := range at {
			for _, id := range ids {
				d.c.dets[a].Observe(elect.Observation{Kind: kind, Process: id})
			}
		}
		d.printf("%v %s %v\n", at, map[bool]string{true: "suspect", false: "trust"}[td.Cmd == "suspect"], ids)
	case "campaign":
		id := d.id(t, td, "id")
		d.c.cores[id].el.Campaign(d.c.reading(id))
		d.c.cores[id].drainElect(d.c.reading(id))
		d.c.collect(id)
		d.printf("p%d campaigns\n", id)
		d.report(id, "")
	case "propose":
		d.propose(t, td)
	case "add-learner", "promote", "remove":
		d.membership(t, td)
	case "read":
		id := d.id(t, td, "id")
		var rid uint64
		td.ScanArgs(t, "rid", &rid)
		level := ReadFollower
		if arg, ok := td.Arg("level"); ok {
			switch arg.SingleVal(t) {
			case "lease":
				level = ReadLease
			case "stale":
				level = ReadStale
			case "follower":
			default:
				td.Fatalf(t, "unknown read level %q", arg.SingleVal(t))
			}
		}
		d.c.cores[id].Read(d.c.reading(id), rid, level)
		d.c.collect(id)
		d.printf("p%d reads (%v, id %d)\n", id, level, rid)
		d.report(id, "")
	case "compact":
		d.compact(t, td)
	case "snapshot-accept", "snapshot-sent", "snapshot-installed":
		d.snapshot(t, td)
	case "suspend":
		id := d.id(t, td, "id")
		d.suspended[id] = d.c.reading(id)
		d.printf("p%d's host is suspended at %v; its clock does not count the time\n", id, d.suspended[id])
	case "check-suspend":
		d.checkSuspend(t, td)
	case "status", "log", "debug", "lead":
		for _, id := range d.targets(t, td, d.c.ids()) {
			d.show(td.Cmd, id)
		}
	case "queue":
		for _, m := range d.c.queue {
			d.printf("%v\n", m)
		}
		if len(d.c.queue) == 0 {
			d.printf("nothing queued\n")
		}
	case "held":
		for _, h := range d.held {
			d.printf("#%d: %v\n", h.n, h.m)
		}
		if len(d.held) == 0 {
			d.printf("nothing held\n")
		}
	case "check":
		d.check()
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	d.nameReigns()
	return d.rewriteNames(d.out.String())
}

func (d *interaction) printf(format string, args ...any) { fmt.Fprintf(&d.out, format, args...) }

// peek is the current reading at id, for looking: unlike tcluster.reading
// it does not move the clock, so observing changes nothing that follows.
func (d *interaction) peek(id edict.ProcessID) edict.Time {
	return edict.Time{Incarnation: d.c.inc[id], Nanos: d.c.now}
}

// clock is the shared clock since its origin.
func (d *interaction) clock() time.Duration { return time.Duration(d.c.now) - time.Hour }

func (d *interaction) boot(t *testing.T, td *datadriven.TestData) {
	d.c = nil
	ids := d.ids(t, td, "ids")
	d.c = newTCluster(t, ids...)
	d.marks = map[edict.ProcessID]*mark{}
	d.snaps = map[[2]edict.ProcessID]wire.SnapshotHeader{}
	d.suspended = map[edict.ProcessID]edict.Time{}
	d.readyAt = map[edict.ProcessID]edict.Time{}
	d.printf("%v booted: epoch 0, members %v\n", ids, d.c.epoch0.Members)
	for _, id := range ids {
		d.report(id, "")
	}
}

// settle steps the clock, ticks every process that is up and delivers
// everything, printing events rather than messages.
func (d *interaction) settle(t *testing.T, td *datadriven.TestData) {
	dur := d.duration(t, td, "d", time.Second)
	step := d.duration(t, td, "step", 5*time.Millisecond)
	var until func() bool
	var cond string
	if arg, ok := td.Arg("until"); ok {
		cond = arg.SingleVal(t)
		until = d.condition(t, td, cond)
	}
	verbose := td.HasArg("verbose")
	var n counts
	done := false
	for end := d.c.now + int64(dur); !done && d.c.now < end; {
		d.c.advance(step)
		for _, id := range d.upIDs() {
			d.guard(id, d.clock().String()+" ", func() { d.c.tick(id) })
			d.report(id, d.clock().String()+" ")
			if until != nil && until() {
				done = true
				break
			}
		}
		for !done && len(d.c.queue) > 0 {
			m := d.c.queue[0]
			d.c.queue = d.c.queue[1:]
			d.route(m, d.clock().String()+" ", verbose, &n)
			done = until != nil && until()
		}
	}
	switch {
	case until == nil:
		d.printf("t=%s", d.clock())
	case done:
		d.printf("%s at t=%s", cond, d.clock())
	default:
		d.printf("%s does not hold at t=%s", cond, d.clock())
	}
	d.printf(": %d messages delivered, %d lost", n.delivered, n.dropped)
	if n.held > 0 {
		d.printf(", %d held", n.held)
	}
	if len(d.c.queue) > 0 {
		d.printf(", %d still queued", len(d.c.queue))
	}
	d.printf("\n")
}

type counts struct{ delivered, dropped, held int }

// condition parses until=pN:what.
func (d *interaction) condition(t *testing.T, td *datadriven.TestData, s string) func() bool {
	who, what, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(strings.TrimPrefix(who, "p"), 10, 64)
	if !ok || err != nil || !strings.HasPrefix(who, "p") {
		td.Fatalf(t, "until=%s: want pN:leads|fetching|starting|ready|follows", s)
	}
	id := edict.ProcessID(n)
	phases := map[string]phase{"fetching": phaseFetching, "starting": phaseStarting, "ready": phaseReady}
	switch what {
	case "leads":
		return func() bool { return d.c.cores[id].lead != nil }
	case "follows":
		return func() bool { return d.c.cores[id].lead == nil }
	}
	ph, ok := phases[what]
	if !ok {
		td.Fatalf(t, "until=%s: want pN:leads|fetching|starting|ready|follows", s)
	}
	return func() bool { l := d.c.cores[id].lead; return l != nil && l.phase == ph }
}

// deliver delivers the queued messages that match f, and those they make
// that match, until none is left; the others stay queued.
func (d *interaction) deliver(f msgFilter) {
	var n counts
	for i := 0; ; i++ {
		if i > 100000 {
			d.t.Fatal("messages keep coming")
		}
		k := slices.IndexFunc(d.c.queue, f.match)
		if k < 0 {
			break
		}
		m := d.c.queue[k]
		d.c.queue = slices.Delete(d.c.queue, k, k+1)
		d.route(m, "", true, &n)
		if d.t.Failed() {
			return
		}
	}
	if n.delivered+n.dropped+n.held == 0 {
		d.printf("nothing to deliver\n")
	}
}

// route takes m through the network: lost if either end is down or a rule
// drops it, set aside if a rule holds it, delivered otherwise. Unless
// verbose, only what is held and what the receiver did prints.
func (d *interaction) route(m wire.Message, prefix string, verbose bool, n *counts) {
	switch {
	case d.c.down[m.To] || d.c.down[m.From] || d.c.cores[m.To] == nil:
		n.dropped++
		if verbose {
			d.printf("%sdropped (%v is down): %v\n", prefix, map[bool]edict.ProcessID{true: m.To, false: m.From}[d.c.down[m.To]], m)
		}
		return
	}
	for _, r := range d.rules {
		if !r.f.match(m) {
			continue
		}
		if r.hold {
			n.held++
			d.printf("%s", prefix)
			d.holdMsg(m)
		} else {
			n.dropped++
			if verbose {
				d.printf("%sdropped: %v\n", prefix, m)
			}
		}
		return
	}
	n.delivered++
	if verbose {
		d.printf("%s%v\n", prefix, m)
		prefix += "  "
	}
	d.step(m, prefix)
}

// step hands m to its receiver and prints, after prefix, what it did.
func (d *interaction) step(m wire.Message, prefix string) {
	d.guard(m.To, prefix, func() {
		if err := d.c.cores[m.To].Step(d.c.reading(m.To), m); err != nil {
			d.printf("%s%v refused it: %v\n", prefix, m.To, err)
		}
		d.c.collect(m.To)
	})
	d.report(m.To, prefix)
}

// guard runs f, which drives id's Core. A Core panics when one of its
// safety assertions fails (a committed index truncated): the transcript
// says so, and the process is down from then on, as a runtime that
// crashed on it would be.
func (d *interaction) guard(id edict.ProcessID, prefix string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			d.printf("%s%v PANICS: %v\n", prefix, id, r)
			d.c.down[id] = true
		}
	}()
	f()
}

func (d *interaction) holdMsg(m wire.Message) {
	d.nHeld++
	d.held = append(d.held, heldMsg{d.nHeld, m})
	d.printf("held #%d: %v\n", d.nHeld, m)
}

// release delivers held messages, late: the network delayed them, so
// they arrive whatever became of their sender since.
func (d *interaction) release(t *testing.T, td *datadriven.TestData) {
	f := d.filter(t, td)
	var idx []int
	if arg, ok := td.Arg("idx"); ok {
		for _, v := range splitVals(arg.Vals) {
			n, err := strconv.Atoi(v)
			if err != nil {
				td.Fatalf(t, "idx=%s: %v", v, err)
			}
			idx = append(idx, n)
		}
	}
	var redirect edict.ProcessID
	if td.HasArg("redirect") {
		redirect = d.id(t, td, "redirect")
	}
	var rest []heldMsg
	var out []wire.Message
	for _, h := range d.held {
		if f.match(h.m) && (len(idx) == 0 || slices.Contains(idx, h.n)) {
			out = append(out, h.m)
			d.printf("released #%d: ", h.n)
			if redirect != edict.None {
				d.printf("(readdressed from %v) ", h.m.To)
				h.m.To = redirect
			}
			if d.c.down[h.m.To] {
				d.printf("lost, %v is down: %v\n", h.m.To, h.m)
				continue
			}
			d.printf("%v\n", h.m)
			d.step(h.m, "  ")
		} else {
			rest = append(rest, h)
		}
	}
	d.held = rest
	if len(out) == 0 {
		d.printf("nothing held matches\n")
	}
}

func (d *interaction) net(t *testing.T, td *datadriven.TestData) {
	if len(td.CmdArgs) > 0 {
		verb := td.CmdArgs[0].Key
		td.CmdArgs = td.CmdArgs[1:]
		switch verb {
		case "clear":
			d.rules = nil
		case "drop", "hold":
			d.rules = append(d.rules, netRule{hold: verb == "hold", f: d.filter(t, td)})
		default:
			td.Fatalf(t, "net %s: want drop, hold or clear", verb)
		}
	}
	if len(d.rules) == 0 {
		d.printf("the network delivers everything\n")
	}
	for _, r := range d.rules {
		d.printf("%s %v\n", map[bool]string{true: "hold", false: "drop"}[r.hold], r.f)
	}
}

func (d *interaction) propose(t *testing.T, td *datadriven.TestData) {
	id := d.id(t, td, "id")
	arg, ok := td.Arg("data")
	if !ok {
		td.Fatalf(t, "propose: data= missing")
	}
	for _, v := range splitVals(arg.Vals) {
		e, err := d.c.cores[id].Propose(d.c.reading(id), wire.EntryCommand, []byte(v))
		if err != nil {
			d.printf("p%d refused %s: %v\n", id, v, err)
			continue
		}
		d.printf("p%d proposed %s at index %d\n", id, v, e.Index)
		if arg, ok := td.Arg("for"); ok {
			var from uint64
			arg.Scan(t, 0, &from)
			d.c.cores[id].TellCommitted(edict.ProcessID(from), e.Index)
			d.printf("p%d tells p%d of its commit at once\n", id, from)
		}
		d.c.cores[id].Flush(d.c.reading(id))
		d.c.collect(id)
		d.report(id, "")
	}
}

// membership has process id propose a membership change of process
// target (add-learner, promote, remove; remove takes force, Force()),
// flushed at once.
func (d *interaction) membership(t *testing.T, td *datadriven.TestData) {
	id, target := d.id(t, td, "id"), d.id(t, td, "target")
	core, now := d.c.cores[id], d.c.reading(id)
	var e wire.Entry
	var err error
	switch td.Cmd {
	case "add-learner":
		e, err = core.AddLearner(now, target, fmt.Sprintf("addr-%d", target))
	case "promote":
		e, err = core.Promote(now, target)
	case "remove":
		var opts []ChangeOption
		if td.HasArg("force") {
			opts = append(opts, Force())
		}
		e, err = core.Remove(now, target, opts...)
	}
	if err != nil {
		d.printf("p%d refused %s p%d: %v\n", id, td.Cmd, target, err)
		return
	}
	d.printf("p%d proposed %s p%d at index %d (%v)\n", id, td.Cmd, target, e.Index, e.Kind)
	core.Flush(d.c.reading(id))
	d.c.collect(id)
	d.report(id, "")
}

func (d *interaction) compact(t *testing.T, td *datadriven.TestData) {
	id := d.id(t, td, "id")
	var trailing uint64
	td.MaybeScanArgs(t, "trailing", &trailing)
	core := d.c.cores[id]
	upTo, err := core.Compact(d.c.reading(id), core.applied, trailing)
	if err != nil {
		d.printf("p%d: %v\n", id, err)
		return
	}
	d.printf("p%d compacted its log up to %d (applied %d, %d trailing)\n", id, upTo, core.applied, trailing)
}

func (d *interaction) snapshot(t *testing.T, td *datadriven.TestData) {
	from, to := d.id(t, td, "from"), d.id(t, td, "to")
	leader := d.c.cores[from]
	key := [2]edict.ProcessID{from, to}
	switch td.Cmd {
	case "snapshot-accept":
		pos, ok := leader.SnapshotPosition(leader.applied)
		if !ok {
			td.Fatalf(t, "p%d has no snapshot position at its applied index %d", from, leader.applied)
		}
		meta, ok := leader.SnapshotMeta(pos, 0)
		if !ok {
			d.printf("p%d leads no reign: no snapshot to send\n", from)
			return
		}
		d.snaps[key] = meta
		d.printf("p%d streams a snapshot up to %d (reign %v) to p%d\n", from, meta.LastIndex, meta.Reign, to)
		if err := d.c.cores[to].AcceptSnapshot(d.c.reading(to), from, meta); err != nil {
			d.printf("p%d refuses it: %v\n", to, err)
		} else {
			d.printf("p%d accepts it\n", to)
		}
		d.c.collect(to)
		d.report(to, "")
	case "snapshot-sent":
		meta, ok := d.snaps[key]
		if !ok {
			td.Fatalf(t, "no snapshot streams from p%d to p%d", from, to)
		}
		// err=... reports a stream whose outcome never reached the
		// leader (a broken connection, a lost answer).
		var failed string
		td.MaybeScanArgs(t, "err", &failed)
		var err error
		if failed != "" {
			err = errors.New(failed)
		}
		leader.SnapshotSent(d.c.reading(from), to, meta.LastIndex, err)
		d.c.collect(from)
		if err != nil {
			d.printf("p%d: the stream to p%d failed: %v\n", from, to, err)
		} else {
			d.printf("p%d: the stream to p%d ended\n", from, to)
		}
		d.report(from, "")
	case "snapshot-installed":
		meta, ok := d.snaps[key]
		if !ok {
			td.Fatalf(t, "no snapshot streams from p%d to p%d", from, to)
		}
		delete(d.snaps, key)
		if err := d.c.cores[to].SnapshotInstalled(d.c.reading(to), from, meta); err != nil {
			d.printf("p%d refuses to install the snapshot: %v\n", to, err)
		} else {
			d.printf("p%d installed the snapshot up to %d\n", to, meta.LastIndex)
		}
		d.c.collect(to)
		d.report(to, "")
	}
}

// suspendClock is a process's clock as the runtime sees it: it knows when
// the host was last suspended.
type suspendClock struct {
	now, suspended edict.Time
}

func (s suspendClock) Now() edict.Time { return s.now }
func (s suspendClock) Suspended(since edict.Time) bool {
	return !s.suspended.IsZero() && since.Before(s.suspended)
}

// checkSuspend is what the runtime does before it hands the Core an input
// (Driver.Now): ask the clock whether the host was suspended since the
// reading the lease is measured from.
func (d *interaction) checkSuspend(t *testing.T, td *datadriven.TestData) {
	id := d.id(t, td, "id")
	now := d.c.reading(id)
	clock := suspendClock{now: now, suspended: d.suspended[id]}
	core := d.c.cores[id]
	if since, ok := core.LeaseSince(now); ok {
		d.printf("p%d's lease is measured since %v; suspended since then: %t\n", id, since, clock.Suspended(since))
	} else {
		d.printf("p%d holds no lease\n", id)
	}
	if r, ok := d.readyAt[id]; ok {
		d.printf("(since p%d's reign became ready, %v: %t)\n", id, r, clock.Suspended(r))
	}
	checkSuspend(core, clock, now)
	d.c.collect(id)
	d.report(id, "")
}

// report prints what id did since the last report: events, reads,
// snapshot requests, applied entries.
func (d *interaction) report(id edict.ProcessID, prefix string) {
	mk := d.mark(id)
	for _, ev := range d.c.events[id][mk.events:] {
		if ev.Kind == BecameLeader {
			d.readyAt[id] = d.peek(id)
		}
		d.printf("%s%v: %s\n", prefix, id, eventString(ev))
	}
	mk.events = len(d.c.events[id])
	for _, rs := range d.c.reads[id][mk.reads:] {
		if rs.Err != nil {
			d.printf("%s%v: read %d fails: %v (leader %v)\n", prefix, id, rs.ID, rs.Err, rs.Leader)
		} else {
			d.printf("%s%v: read %d may be served at index %d (leader %v; applied here %d)\n", prefix, id, rs.ID, rs.Index, rs.Leader, d.c.cores[id].applied)
		}
	}
	mk.reads = len(d.c.reads[id])
	for _, p := range d.c.snapReqs[id][mk.snaps:] {
		d.printf("%s%v: %v needs a snapshot\n", prefix, id, p)
	}
	mk.snaps = len(d.c.snapReqs[id])
	if es := d.c.applied[id]; len(es) > mk.applied {
		d.printf("%s%v: applied %s\n", prefix, id, entriesString(es[mk.applied:]))
		mk.applied = len(es)
	}
	d.nameReigns()
}

func (d *interaction) mark(id edict.ProcessID) *mark {
	if d.marks[id] == nil {
		d.marks[id] = &mark{}
	}
	return d.marks[id]
}

func eventString(ev Event) string {
	s := ev.Kind.String()
	switch ev.Kind {
	case BecameLeader:
		s += fmt.Sprintf(" e%d %v", ev.Epoch, ev.Reign)
	case LeaderChanged:
		s += fmt.Sprintf(" to %v (e%d %v)", ev.Leader, ev.Epoch, ev.Reign)
	case SteppedDown:
		s += ": " + ev.Reason
	case EpochChanged, ConfigChanged:
		s += fmt.Sprintf(" e%d", ev.Epoch)
	}
	return s
}

func entriesString(es []wire.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = entryString(e)
	}
	return strings.Join(parts, " ")
}

func entryString(e wire.Entry) string {
	switch e.Kind {
	case wire.EntryCommand:
		return fmt.Sprintf("%d:%s", e.Index, e.Data)
	case wire.EntryReignStart:
		return fmt.Sprintf("%d:start(%v)", e.Index, e.Stamp)
	}
	return fmt.Sprintf("%d:%v", e.Index, e.Kind)
}

func (d *interaction) show(what string, id edict.ProcessID) {
	core := d.c.cores[id]
	now := d.peek(id)
	state := ""
	if d.c.down[id] {
		state = " (down)"
	}
	switch what {
	case "status":
		s := core.Status(now)
		stored := "none"
		if b, ok := d.c.stable[id][wire.KeyAcceptedReign]; ok {
			r, err := wire.DecodeStamp(wire.KeyAcceptedReign, b)
			if err != nil {
				d.t.Fatal(err)
			}
			stored = r.String()
		}
		d.printf("p%d%s: leader=%v commit=%d applied=%d log=%d..%d accepted=%v (stored %s)", id, state, s.Leader, s.Commit, s.Applied, s.FirstIndex, s.LastIndex, s.AcceptedReign, stored)
		if s.IsLeader {
			d.printf(" leads %v, lease until %v", s.Reign, s.LeaseExpiry)
		}
		d.printf("\n")
	case "log":
		var es []wire.Entry
		for i := core.log.first(); i <= core.log.lastIndex(); i++ {
			es = append(es, *core.log.entry(i))
		}
		d.printf("p%d%s: ", id, state)
		if core.log.snap.Index > 0 {
			d.printf("snapshot up to %d, then ", core.log.snap.Index)
		}
		d.printf("%s (commit %d)\n", entriesString(es), core.commit)
	case "debug":
		d.printf("p%d%s: %s\n", id, state, core.Debug(now))
	case "lead":
		l := core.lead
		if l == nil {
			d.printf("p%d%s leads no reign\n", id, state)
			return
		}
		phases := map[phase]string{phaseFetching: "fetching", phaseStarting: "starting", phaseReady: "ready"}
		d.printf("p%d%s leads: phase=%s attempt=%v", id, state, phases[l.phase], l.attempt)
		if l.phase == phaseFetching {
			d.printf(" fetching from %v after %d, fetch id %d", l.best, l.fetchFrom, l.fetchID)
		} else {
			d.printf(" reign %v starting at %d", l.reign, l.reignIndex)
		}
		d.printf("\n")
	}
}

// check reports whether two processes hold different entries at an index
// both count as committed: a committed write lost.
func (d *interaction) check() {
	type at struct {
		id edict.ProcessID
		e  wire.Entry
	}
	seen := map[uint64]at{}
	bad := false
	for _, id := range d.c.ids() {
		core := d.c.cores[id]
		for i := core.log.first(); i <= min(core.commit, core.log.lastIndex()); i++ {
			e := *core.log.entry(i)
			if s, dup := seen[i]; dup && !s.e.Stamp.Equal(e.Stamp) {
				d.printf("COMMITTED ENTRY LOST: index %d is committed as %s on %v and as %s on %v\n", i, entryString(s.e), s.id, entryString(e), id)
				bad = true
				continue
			}
			seen[i] = at{id, e}
		}
	}
	if !bad {
		d.printf("committed entries agree\n")
	}
}

// nameReigns registers the reigns the processes know of, in a fixed
// order, so that they print as R1, R2, ….
func (d *interaction) nameReigns() {
	add := func(s edict.Stamp) {
		if s.IsZero() || slices.ContainsFunc(d.reigns, s.Equal) {
			return
		}
		d.reigns = append(d.reigns, s)
	}
	for _, id := range d.c.ids() {
		core := d.c.cores[id]
		if core.lead != nil {
			add(core.lead.reign)
		}
		for i := core.log.first(); i <= core.log.lastIndex(); i++ {
			if e := core.log.entry(i); e.Kind == wire.EntryReignStart {
				add(e.Stamp)
			}
		}
		add(core.acceptedReign)
		for _, ev := range d.c.events[id] {
			add(ev.Reign)
		}
	}
}

var hourOrigin = regexp.MustCompile(`(\d+):1h0m`)

// rewriteNames prints reign stamps by name and readings from the clock's
// origin.
func (d *interaction) rewriteNames(s string) string {
	for i, r := range d.reigns {
		s = strings.ReplaceAll(s, r.String(), fmt.Sprintf("R%d", i+1))
	}
	return hourOrigin.ReplaceAllString(s, "$1:")
}

func (d *interaction) upIDs() []edict.ProcessID {
	return slices.DeleteFunc(d.c.ids(), func(id edict.ProcessID) bool { return d.c.down[id] })
}

func (d *interaction) downIDs() []edict.ProcessID {
	return slices.DeleteFunc(d.c.ids(), func(id edict.ProcessID) bool { return !d.c.down[id] })
}

func (d *interaction) filter(t *testing.T, td *datadriven.TestData) msgFilter {
	var f msgFilter
	for _, arg := range td.CmdArgs {
		switch arg.Key {
		case "from":
			f.from = d.parseIDs(t, td, arg)
		case "to":
			f.to = d.parseIDs(t, td, arg)
		case "kind":
			for _, v := range splitVals(arg.Vals) {
				k := slices.IndexFunc(kindNamesList, func(n string) bool { return n == v })
				if k < 0 {
					td.Fatalf(t, "kind=%s: want one of %v", v, kindNamesList[1:])
				}
				f.kinds = append(f.kinds, wire.Kind(k))
			}
		case "last":
			for _, v := range splitVals(arg.Vals) {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					td.Fatalf(t, "last=%s: %v", v, err)
				}
				f.last = append(f.last, n)
			}
		case "idx", "redirect":
		default:
			td.Fatalf(t, "%s: unknown filter %q", td.Cmd, arg.Key)
		}
	}
	return f
}

// kindNamesList is transport's kind names, by Kind.
var kindNamesList = func() []string {
	var ns []string
	for k := wire.Kind(0); k == 0 || k.Valid(); k++ {
		if k == 0 {
			ns = append(ns, "")
			continue
		}
		ns = append(ns, k.String())
	}
	return ns
}()

func splitVals(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func (d *interaction) parseIDs(t *testing.T, td *datadriven.TestData, arg datadriven.CmdArg) []edict.ProcessID {
	var ids []edict.ProcessID
	for _, v := range splitVals(arg.Vals) {
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "p"), 10, 64)
		if err != nil || n == 0 {
			td.Fatalf(t, "%s=%s: not a process id", arg.Key, v)
		}
		ids = append(ids, edict.ProcessID(n))
	}
	return ids
}

func (d *interaction) ids(t *testing.T, td *datadriven.TestData, key string) []edict.ProcessID {
	arg, ok := td.Arg(key)
	if !ok {
		td.Fatalf(t, "%s: %s= missing", td.Cmd, key)
	}
	ids := d.parseIDs(t, td, arg)
	if d.c != nil {
		for _, id := range ids {
			if d.c.cores[id] == nil {
				td.Fatalf(t, "%s=%v: no such process", key, id)
			}
		}
	}
	return ids
}

// targets are the processes named by id= or ids=, or def.
func (d *interaction) targets(t *testing.T, td *datadriven.TestData, def []edict.ProcessID) []edict.ProcessID {
	switch {
	case td.HasArg("id"):
		return d.ids(t, td, "id")
	case td.HasArg("ids"):
		return d.ids(t, td, "ids")
	}
	return def
}

func (d *interaction) id(t *testing.T, td *datadriven.TestData, key string) edict.ProcessID {
	ids := d.ids(t, td, key)
	if len(ids) != 1 {
		td.Fatalf(t, "%s=: one process", key)
	}
	return ids[0]
}

func (d *interaction) duration(t *testing.T, td *datadriven.TestData, key string, def time.Duration) time.Duration {
	arg, ok := td.Arg(key)
	if !ok {
		if def == 0 {
			td.Fatalf(t, "%s: %s= missing", td.Cmd, key)
		}
		return def
	}
	v, err := time.ParseDuration(arg.SingleVal(t))
	if err != nil {
		td.Fatalf(t, "%s=%s: %v", key, arg.SingleVal(t), err)
	}
	return v
}
