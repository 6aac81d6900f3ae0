package replog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// Errors a caller of the Core (or Node) sees.
var (
	ErrNotLeader    = errors.New("edictlog: not the leader")
	ErrNotReady     = errors.New("edictlog: the reign has not started yet")
	ErrTransferring = errors.New("edictlog: leadership transfer in progress")
	ErrStopped      = errors.New("edictlog: the epoch is ending (membership change in progress)")
)

// CoreConfig configures a Core.
type CoreConfig struct {
	// Elect configures the lease protocol. Its ID and Epochs are set by
	// the Core from this config and the restored state.
	Elect elect.Config
	// ID is this process.
	ID edict.ProcessID
	// MaxAppendEntries bounds the entries of one Append (default 256).
	MaxAppendEntries int
	// MaxAppendBytes bounds the entry data of one Append, and of one
	// FetchReply, beyond the first entry, which always goes (default
	// 4 MiB): well under the transport's frame limit (16 MiB by
	// default), which refuses a larger message, so that a run of large
	// entries never makes an append that can never be sent.
	MaxAppendBytes int
	// MaxInflight bounds the Appends in flight to one follower, the
	// pipelining window (default 64).
	MaxInflight int
	// EagerInflight is how many Appends may be in flight to a follower
	// before the leader holds back one that would not be full
	// (MaxAppendEntries entries, or MaxAppendBytes of data) until a reply
	// comes (default 2): entries
	// proposed meanwhile then share it. A follower writes what arrives
	// while it is busy in one fsync anyway, so an append held back is
	// written no later than one sent at once would be, and one append of
	// many entries costs the leader, the network and the follower about
	// what one of a single entry does. One append in flight would leave
	// the follower's disk idle for a round trip between its writes.
	EagerInflight int
	// Heartbeat is how often the leader sends an empty Append to a
	// follower it has sent nothing else (default 50ms), which carries the
	// commit index.
	Heartbeat time.Duration
}

func (c *CoreConfig) setDefaults() {
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = 256
	}
	if c.MaxAppendBytes == 0 {
		c.MaxAppendBytes = 4 << 20
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 64
	}
	if c.EagerInflight == 0 {
		c.EagerInflight = 2
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 50 * time.Millisecond
	}
}

// State is what a Core restarts from: what the stores hold.
type State struct {
	// Epochs are the known epoch configurations, at least the bootstrap one.
	Epochs []wire.EpochConfig
	// Records are the lease protocol's per-epoch records.
	Records []wire.EpochRecord
	// AcceptedReign is the highest reign whose appends were accepted.
	AcceptedReign edict.Stamp
	// Snapshot is the last entry the newest snapshot covers, which the
	// state machine has been restored to; Entries follow it.
	Snapshot wire.Position
	Entries  []wire.Entry
	// Applied, if above Snapshot's index, is where a state machine that
	// keeps its own state (fsm.DiskFSM) is durable: one of Entries, all
	// of which up to it it applied, so they are committed. The Core hands
	// out only the entries after it (RecoverDiskFSM).
	Applied uint64
	// SnapshotConfig is the epoch configuration the newest snapshot
	// records. A snapshot installed from a leader may span stop edicts
	// this process never saw; if it crashed after publishing the
	// snapshot and before the install's records were written, only the
	// snapshot holds that configuration, and NewCore records it (as
	// SnapshotInstalled would have).
	SnapshotConfig wire.EpochConfig
	// CleanStop: the life before this one ended with a clean stop
	// (Core.Retire, recorded under wire.KeyCleanStop): it holds no grant
	// this life could forget, so this life starts without the restart
	// quarantine (elect.Config.AfterCleanStop).
	CleanStop bool
}

// Core is the replicated log as a deterministic state machine (docs/architecture.md, "Deterministic cores"):
// it wraps the lease core, and adds reigns, replication, commit, reads,
// snapshots and epochs. Every call takes the current clock reading; the
// caller does the I/O that Ready asks for. Not safe for concurrent use.
type Core struct {
	cfg CoreConfig
	id  edict.ProcessID
	el  *elect.Core
	log memLog

	epochs        map[uint64]wire.EpochConfig
	acceptedReign edict.Stamp

	commit    uint64 // highest index known committed
	handed    uint64 // highest index handed out in Ready.Apply
	applied   uint64 // highest index the state machine applied
	persisted uint64 // highest index known durable in the local store
	stored    uint64 // last index the store will hold once every batch handed out is written
	// syncs are the Readys whose batch (or durability-promising messages)
	// the runtime is still writing, oldest first: upTo is the last index
	// the store holds once that batch is durable, lowered when a later
	// truncation or reset replaces entries it wrote. Synced retires them.
	syncs   []pendingSync
	syncSeq uint64
	// recordsAt is the Sync of the newest Ready whose batch holds a lease
	// record (an epoch's wedge record or configuration, wire.EpochKeyPrefix),
	// syncedTo the newest Sync known durable, and readyRecords whether the
	// Ready being built holds one. A lease message leaves at once only
	// while every lease record handed out is durable (drainElect).
	recordsAt, syncedTo uint64
	readyRecords        bool
	// configDone is the highest committed index whose membership effects
	// were carried out.
	configDone uint64

	lead       *leader
	leaderHint edict.ProcessID

	// readQueue are the follower reads waiting for the next request to
	// the leader, readBatches the requests in flight (at most one per
	// leader) and readBatchID the last request's id (read.go).
	readQueue   []followerRead
	readBatches []readBatch
	readBatchID uint64
	// campaignIn is an epoch this process was asked to lead (TimeoutNow)
	// before it knew its predecessor terminated.
	campaignIn uint64
	// handedBy is who handed this process the epoch campaignIn names
	// (TimeoutNow's sender; None for its own succession): its campaign
	// asks again a member whose refusal names that sender
	// (elect.Core.CampaignFor).
	handedBy edict.ProcessID
	// campaignUntil bounds how long a hand-over's campaign waits for the
	// log to bring the epoch it names, known so far only from a peer's
	// news (EpochConfig.Heard), which it may not campaign in: a target
	// whose log took the stop edict in a snapshot learns the epoch from
	// its next committed config edict — a retiring leader's own, sent
	// beside the hand-over.
	campaignUntil edict.Time
	// wedgeOnStepDown: this leader committed a stop edict and wedges its
	// epoch once its lease lapses.
	wedgeOnStepDown bool
	// succession: this process led an epoch it ended with a stop edict,
	// and the next epoch is to be led at once by this process or by the
	// member it hands over to (membership.go, succeed).
	succession *succession
	// removedFrom is one past the epoch of the last configuration that
	// left this process out (Removed), so that it is reported once.
	removedFrom uint64
	// stopProof is the newest stop edict known committed (by this log,
	// or by the news of an epoch it began), which this process's wedge
	// requests carry.
	stopProof wire.Position
	// learnAt, learnID and learnPeer pace the committed fetches of a
	// process that knows its newest epoch only as Heard (learn.go).
	learnAt       edict.Time
	learnID       uint64
	learnPeer     int
	learnProgress bool
	// lastContact is when an append from a leader was last accepted.
	lastContact edict.Time
	lastNow     edict.Time
	// retireSeq is the Sync of the Ready whose batch holds the clean-stop
	// record (retire.go); zero until the lease core retired.
	retireSeq uint64
	ready     Ready
}

// NewCore returns a Core restarting from st at reading now.
func NewCore(cfg CoreConfig, st State, now edict.Time) (*Core, error) {
	cfg.setDefaults()
	if cfg.ID == edict.None {
		return nil, errors.New("edictlog: CoreConfig.ID must be non-zero")
	}
	if len(st.Epochs) == 0 {
		return nil, errors.New("edictlog: State.Epochs must hold at least the bootstrap epoch")
	}
	c := &Core{cfg: cfg, id: cfg.ID, epochs: map[uint64]wire.EpochConfig{}, lastNow: now}
	var ecs []wire.EpochConfig
	for _, e := range st.Epochs {
		if err := e.Check(); err != nil {
			return nil, fmt.Errorf("edictlog: epoch %d: %w", e.Epoch, err)
		}
		c.epochs[e.Epoch] = e
		ecs = append(ecs, e)
		if e.StopIndex > c.stopProof.Index {
			c.stopProof = wire.Position{Index: e.StopIndex, Stamp: e.StopStamp}
		}
	}
	c.acceptedReign = st.AcceptedReign
	c.log.snap = st.Snapshot
	for i, e := range st.Entries {
		if e.Index != st.Snapshot.Index+1+uint64(i) {
			return nil, fmt.Errorf("edictlog: restored entry %d at position %d does not follow the snapshot ending at %d", e.Index, i, st.Snapshot.Index)
		}
	}
	c.log.entries = slices.Clone(st.Entries)
	if st.Applied > c.log.lastIndex() {
		return nil, fmt.Errorf("edictlog: the state machine applied up to %d, beyond the restored log's last entry %d", st.Applied, c.log.lastIndex())
	}
	applied := max(st.Snapshot.Index, st.Applied)
	c.commit, c.handed, c.applied = applied, applied, applied
	// The configuration entries up to applied are carried out again on
	// the first step, as they would be once a leader's commit index
	// reached them.
	c.configDone = st.Snapshot.Index
	c.persisted, c.stored = c.log.lastIndex(), c.log.lastIndex()
	ec := cfg.Elect
	ec.ID, ec.Epochs, ec.Log = cfg.ID, ecs, electLog{c}
	ec.AfterCleanStop = st.CleanStop
	el, err := elect.New(ec, st.Records, now)
	if err != nil {
		return nil, err
	}
	c.el = el
	if cfg := st.SnapshotConfig; len(cfg.Members) > 0 && !mutated(RuleRecoverInstall) {
		if old, known := c.epochs[cfg.Epoch]; !known || old.Heard {
			c.epochs[cfg.Epoch] = cfg
			if b, err := wire.EncodeEpochConfig(cfg); err == nil {
				c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
			}
			c.learnRanEpoch(now, cfg)
		}
	}
	// Wedging is retried until a quorum is wedged, but the retries are not
	// durable: a process that restarts knowing a newer epoch than its
	// active one resumes wedging, or its predecessors' members that
	// already moved on never ask again and the epoch change stalls.
	if top := slices.Max(slices.Collect(maps.Keys(c.epochs))); top > c.el.ActiveEpoch() {
		c.wedgePredecessors(now)
	}
	c.drainElect(now)
	return c, nil
}

// Ready returns and clears the pending work; see Ready for the order in
// which to do it.
func (c *Core) Ready() Ready {
	// Apply only what is durable here too: a state machine ahead of its
	// own log could take a snapshot of entries a crash then loses from it.
	if hi := min(c.commit, c.persisted); c.handed < hi {
		es := c.log.slice(c.handed+1, hi+1, 0)
		c.ready.Apply = append(c.ready.Apply, cloneEntries(es)...)
		c.handed = hi
	}
	r := c.ready
	c.ready = Ready{}
	c.stored = c.log.lastIndex()
	if !r.Batch.Empty() || len(r.Messages) > 0 {
		c.syncSeq++
		r.Sync = c.syncSeq
		c.syncs = append(c.syncs, pendingSync{seq: c.syncSeq, upTo: c.stored})
		if c.readyRecords {
			c.recordsAt = c.syncSeq
		}
	}
	c.readyRecords = false
	return r
}

// pendingSync is a Ready's batch the runtime is writing.
type pendingSync struct{ seq, upTo uint64 }

// Advance tells the Core that the runtime has done r's work: sent its
// messages, handed its batch to the store, applied, served, reported. The
// runtime calls Ready, does the work, and calls Advance before any other
// call. The batch need not be durable yet; Synced says when it is.
func (c *Core) Advance(now edict.Time, r Ready) {
	c.advanceClock(now)
	c.afterStep(now)
}

// Synced tells the Core that the batches of every Ready up to the one
// whose Sync was seq are durable, and the messages that waited for them
// sent: the store holds the log as it was at that Ready, except what a
// later truncation or reset replaces. Storage completions are inputs like
// any other, so the Core stays deterministic while the runtime writes off
// its loop (etcd-raft's AsyncStorageWrites): lease messages are stepped
// and answered while a batch is being fsynced (docs/protocol.md).
func (c *Core) Synced(now edict.Time, seq uint64) {
	c.advanceClock(now)
	c.syncedTo = max(c.syncedTo, seq)
	for len(c.syncs) > 0 && c.syncs[0].seq <= seq {
		c.persisted = max(c.persisted, min(c.syncs[0].upTo, c.log.lastIndex()))
		c.syncs = c.syncs[1:]
	}
	c.afterStep(now)
}

// unsynced lowers the pending batches' reach to below index i, whose entry
// (and those after it) the log replaces: the store holding what those
// batches wrote there does not hold this log's entries.
func (c *Core) unsynced(i uint64) {
	for k := range c.syncs {
		c.syncs[k].upTo = min(c.syncs[k].upTo, i-1)
	}
}

// Applied tells the Core the state machine has applied up to index.
func (c *Core) Applied(now edict.Time, index uint64) {
	c.advanceClock(now)
	if index > c.applied {
		c.applied = index
	}
	c.afterStep(now)
}

func (c *Core) advanceClock(now edict.Time) {
	if now.Before(c.lastNow) {
		panic(fmt.Sprintf("edictlog: clock went backwards: %v after %v", now, c.lastNow))
	}
	c.lastNow = now
}

// Tick lets timers fire: lease renewal and expiry, heartbeats, retries.
func (c *Core) Tick(now edict.Time) {
	c.advanceClock(now)
	c.el.Tick(now)
	c.drainElect(now)
	c.afterStep(now)
}

// NextTick is the reading by which Tick should next be called.
func (c *Core) NextTick() edict.Time {
	next := c.el.NextTick()
	if c.lead == nil && c.learning() && c.learnAt.After(c.lastNow) && c.learnAt.Before(next) {
		next = c.learnAt
	}
	if c.lead != nil {
		hb := c.lastNow.Add(c.cfg.Heartbeat / 2)
		if hb.Before(next) {
			next = hb
		}
	}
	if at, ok := c.nextReadResend(); ok && at.Before(next) {
		next = at
	}
	return next
}

// Step delivers a message received at reading now. The message must be
// valid (wire.Message.Validate): transports validate every message once,
// at decode (the simulator, at send). Misdirected input is refused with
// an error and changes nothing.
func (c *Core) Step(now edict.Time, m wire.Message) error {
	if m.To != c.id {
		return fmt.Errorf("edictlog: message for %v delivered to %v", m.To, c.id)
	}
	c.advanceClock(now)
	var err error
	switch m.Kind() {
	case wire.KindLease:
		err = c.stepLease(now, *m.Lease)
	case wire.KindAppend:
		c.onAppend(now, m.From, m.Append)
	case wire.KindAppendReply:
		c.onAppendReply(now, m.From, m.AppendReply)
	case wire.KindReadIndex:
		c.onReadIndex(now, m.From, m.ReadIndex)
	case wire.KindReadIndexReply:
		c.onReadIndexReply(now, m.From, m.ReadIndexReply)
	case wire.KindTimeoutNow:
		c.onTimeoutNow(now, m.From, m.TimeoutNow)
	case wire.KindFetch:
		if m.Fetch.Committed {
			c.onCommittedFetch(m.From, m.Fetch)
		} else {
			c.onFetch(now, m.From, m.Fetch)
		}
	case wire.KindFetchReply:
		if m.FetchReply.Committed {
			c.onCommittedFetchReply(now, m.From, m.FetchReply)
		} else {
			c.onFetchReply(now, m.From, m.FetchReply)
		}
	default:
		panic(fmt.Sprintf("edictlog: Step given a message that was never validated: %v", m))
	}
	c.afterStep(now)
	return err
}

// afterStep does what any input may have made due.
func (c *Core) afterStep(now edict.Time) {
	if c.lead != nil {
		c.leaderTick(now)
	}
	c.learnCommitted(now)
	c.processCommitted(now)
	c.checkReads(now)
	if c.campaignIn != 0 && c.el.ActiveEpoch() == c.campaignIn &&
		!(c.epochs[c.campaignIn].Heard && now.Before(c.campaignUntil) && !mutated(RuleHandOverAwaitsEpoch)) {
		c.campaignIn = 0
		c.el.CampaignFor(now, c.handedBy)
		c.handedBy = edict.None
		c.drainElect(now)
	}
	c.checkSuccession(now)
	c.retire(now)
}

func (c *Core) stepLease(now edict.Time, m wire.Lease) error {
	if err := c.el.Step(now, m); err != nil {
		return err
	}
	c.drainElect(now)
	return nil
}

// drainElect carries out the lease core's Ready: its records join the
// batch, its messages go out, its events change the log's role.
//
// A lease message leaves at once only if every lease record this process
// has handed to its store is durable; otherwise it waits in
// Ready.Messages, which leave after this Ready's batch and every earlier
// one. What a lease message says rests on those records, whichever step
// wrote them: a wedge reply on the wedge record (an earlier step may have
// wedged this process, and a repeated request finds it wedged in memory
// only), a grant request or grant in a new epoch on the records that
// terminated the old one, news on the configurations it names. Sent
// ahead of them, a crash could take back what the message told: a wedge
// counted toward a blocking set that is unwedged again after the crash,
// and the old epoch elects a leader beside the new one. Only records
// count, not entries: a grant reports the durable log position
// (durablePosition), whatever the disk still has queued, so a leader's
// renewals never wait behind appends; they wait only while an epoch's
// records are being written, during a membership change.
func (c *Core) drainElect(now edict.Time) {
	rd := c.el.Ready()
	for _, r := range rd.Persist {
		b, err := wire.EncodeEpochRecord(r)
		if err != nil {
			panic(err) // a fixed struct of integers and booleans always encodes
		}
		c.setStable(wire.EpochWedgeKey(r.Epoch), b)
	}
	wait := c.readyRecords || c.recordsAt > c.syncedTo
	if mutated(RuleMessagesWaitForRecords) {
		wait = len(rd.Persist) > 0
	}
	for _, m := range rd.Messages {
		tm := wire.LeaseMessage(m)
		if wait {
			c.ready.Messages = append(c.ready.Messages, tm)
		} else {
			c.ready.Immediate = append(c.ready.Immediate, tm)
		}
	}
	for _, ev := range rd.Events {
		switch ev.Kind {
		case elect.LeaseAcquired:
			if ev.NewReign {
				c.startReign(now, ev)
			}
		case elect.LeaseLost:
			c.stepDown(now, "lease lost")
		case elect.EpochTerminated:
			c.onEpochTerminated(now, ev.Epoch)
		case elect.EpochHeard:
			c.hearEpoch(now, ev)
		case elect.StopNamed:
			c.learnNamedStop(now, ev)
		case elect.Retired:
			c.onRetired(now)
		}
	}
}

func (c *Core) setStable(key string, value []byte) {
	if strings.HasPrefix(key, wire.EpochKeyPrefix) {
		c.readyRecords = true
	}
	if c.ready.Batch.Stable == nil {
		c.ready.Batch.Stable = map[string][]byte{}
	}
	c.ready.Batch.Stable[key] = value
}

// durablePosition is the last entry the local store is known to hold.
// electLog is what the lease core reports of this log (elect.Log): grants
// carry the durable position, wedges the newest stop edict known
// committed.
type electLog struct{ c *Core }

func (l electLog) Durable() (uint64, edict.Stamp) {
	p := l.c.durablePosition()
	return p.Index, p.Stamp
}

func (l electLog) StopProof() (uint64, edict.Stamp) {
	return l.c.stopProof.Index, l.c.stopProof.Stamp
}

func (c *Core) durablePosition() wire.Position {
	i := min(c.persisted, c.log.lastIndex())
	if mutated(RuleGrantsReportDurable) {
		i = c.log.lastIndex()
	}
	st, ok := c.log.stampAt(i)
	if !ok {
		return c.log.snap
	}
	return wire.Position{Index: i, Stamp: st}
}

// acceptReign records a newer reign durably. acceptedReign never
// decreases: it is the fence that keeps a deposed reign's appends out, and
// moving it back — as a snapshot accepted before a newer reign and
// installed after it once did — readmits them.
func (c *Core) acceptReign(r edict.Stamp) {
	cmp, err := r.Compare(c.acceptedReign)
	if err != nil || cmp <= 0 && !mutated(RuleAcceptedReignMonotone) || cmp == 0 {
		return
	}
	c.acceptedReign = r
	b, err := wire.EncodeStamp(r)
	if err != nil {
		panic(err) // stamps are validated before they get here
	}
	c.setStable(wire.KeyAcceptedReign, b)
}

// appendEntries adds entries to the log and to the batch.
func (c *Core) appendEntries(es ...wire.Entry) {
	c.log.append(es...)
	c.ready.Batch.Entries = append(c.ready.Batch.Entries, es...)
}

// truncateFrom removes the log's suffix from index i, in memory, in the
// pending batch, and in the store if it already holds it.
func (c *Core) truncateFrom(i uint64) {
	if i <= c.commit {
		panic(fmt.Sprintf("edictlog: %v truncating committed index %d (commit %d): a safety invariant is broken", c.id, i, c.commit))
	}
	c.log.truncate(i)
	b := &c.ready.Batch
	for k, e := range b.Entries {
		if e.Index >= i {
			clear(b.Entries[k:])
			b.Entries = b.Entries[:k]
			break
		}
	}
	if i <= c.stored && (b.TruncateFrom == 0 || i < b.TruncateFrom) {
		b.TruncateFrom = i
	}
	if c.persisted >= i {
		c.persisted = i - 1
	}
	c.unsynced(i)
}

func (c *Core) send(m wire.Message, immediate bool) {
	m.From = c.id
	if immediate {
		c.ready.Immediate = append(c.ready.Immediate, m)
	} else {
		c.ready.Messages = append(c.ready.Messages, m)
	}
}

func (c *Core) event(e Event) { c.ready.Events = append(c.ready.Events, e) }

func cloneEntries(es []wire.Entry) []wire.Entry { return slices.Clone(es) }

// Status is a snapshot of the Core's state for operators.
type Status struct {
	ID    edict.ProcessID
	Epoch uint64
	// EpochHeard: this process knows Epoch only from a peer's news, not
	// yet from its log (storage.EpochConfig.Heard); Learners are unknown.
	EpochHeard    bool
	Leader        edict.ProcessID
	IsLeader      bool
	LeaseExpiry   edict.Time
	Reign         edict.Stamp
	AcceptedReign edict.Stamp
	Commit        uint64
	Applied       uint64
	LastIndex     uint64
	FirstIndex    uint64
	Members       []edict.ProcessID
	Learners      []edict.ProcessID
	// Retiring is the member of Epoch on its way out, if any: its leader
	// removed itself, and whoever leads next removes it
	// (wire.EpochConfig.Retiring).
	Retiring edict.ProcessID
	// Match is, at the leader, each peer's highest replicated index.
	Match map[edict.ProcessID]uint64
}

// WriteEpoch is the epoch a write or change proposed now is taken or
// refused in: that of the reign this process leads, else its active one.
// A leader that carries its lease through a membership change refuses
// writes (ErrStopped) in the epoch that ends while it already runs in the
// next; a caller that waits for a later epoch waits for a reign of one.
func (c *Core) WriteEpoch() uint64 {
	if c.lead != nil {
		return c.lead.epoch
	}
	return c.el.ActiveEpoch()
}

// Status reports the Core's state at reading now.
func (c *Core) Status(now edict.Time) Status { return c.StatusSince(now, Status{}) }

// StatusSince reports the Core's state at reading now, as Status does,
// with prev's Members, Learners and Match in it where they hold what the
// new ones would. A Status is read-only once reported, so the two may
// share them; a runtime that reports its Status after every step then
// allocates only when membership or a peer's match changed, not for each
// read its leader serves.
func (c *Core) StatusSince(now edict.Time, prev Status) Status {
	ep := c.el.ActiveEpoch()
	cfg := c.epochs[ep]
	s := Status{ID: c.id, Epoch: ep, EpochHeard: cfg.Heard, Leader: c.leaderHint, AcceptedReign: c.acceptedReign, Commit: c.commit,
		Applied: c.applied, LastIndex: c.log.lastIndex(), FirstIndex: c.log.first(),
		Members: sameOrClone(prev.Members, cfg.Members), Learners: sameOrClone(prev.Learners, cfg.Learners), Retiring: cfg.Retiring}
	if s.Leader != c.id && !c.lastContact.IsZero() {
		// A follower that has not heard from the leader it knows for a
		// lease's length names none: a leader still holding its lease
		// would have sent it a dozen heartbeats meanwhile. Otherwise a
		// process cut off from a dead leader reported it, and was ready,
		// for good (TestNoLeader, 2 runs in 6). A hint, for routing and
		// readiness only: nothing safe rests on Status.Leader.
		if d, ok := now.Sub(c.lastContact); !ok || d > c.el.MaxLease() {
			s.Leader = edict.None
		}
	}
	if _, exp, _, ok := c.el.Lease(now); ok && c.lead != nil && c.lead.serves() {
		s.IsLeader, s.LeaseExpiry, s.Leader, s.Reign = true, exp, c.id, c.lead.reign
		s.Match = c.lead.matches(c.id, c.persisted, prev.Match)
	}
	return s
}

// sameOrClone returns prev if it holds what cur does, else a copy of cur.
func sameOrClone[T comparable](prev, cur []T) []T {
	if prev != nil && slices.Equal(prev, cur) {
		return prev
	}
	return slices.Clone(cur)
}

// Debug describes the Core's internal state in one line, for failure
// reports of the simulator and tests.
func (c *Core) Debug(now edict.Time) string {
	s := fmt.Sprintf("%s quarantined=%t snap=%d accepted=%v", c.el.Debug(now), c.el.Quarantined(now), c.log.snap.Index, c.acceptedReign)
	if gs, ok := c.el.Grant(c.el.ActiveEpoch()); ok {
		s += fmt.Sprintf(" grant=%v/%v/wedged=%t", gs.Grantee, gs.Finish, gs.Wedged)
	}
	// Every epoch this process knows: T terminated, L known to the lease
	// core only as a configuration (no stop edict seen), and the stop
	// edict it holds proof of.
	s += " epochs="
	for _, e := range slices.Sorted(maps.Keys(c.epochs)) {
		st := "?"
		switch {
		case c.el.Terminated(e):
			st = "T"
		case c.el.EpochKnown(e):
			st = "L"
		}
		s += fmt.Sprintf("%d%s,", e, st)
	}
	s += fmt.Sprintf(" stop=%d configDone=%d", c.stopProof.Index, c.configDone)
	if l := c.lead; l != nil {
		s += fmt.Sprintf(" lead{phase=%d reignIndex=%d best=%v bestPos=%d fetchFrom=%d transfer=%v stopped=%t}", l.phase, l.reignIndex, l.best, l.bestPos.Index, l.fetchFrom, l.transfer, l.stopped)
		for _, p := range c.peers(l.epoch) {
			if pr := l.progress[p]; pr != nil {
				s += fmt.Sprintf(" %v{m=%d n=%d i=%d s=%t}", p, pr.match, pr.next, len(pr.inflight), pr.snapshot)
			}
		}
	}
	return s
}
