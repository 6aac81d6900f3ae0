package replog

// The log's safety rules, by the names docs/protocol.md's table and the
// mutation runner use. Each names a check in this package that a mutation
// deletes or weakens (see mutation_on.go); the simulator must then find a
// violation: the table of rules is the log's negative control.
const (
	// RuleCurrentReignCommit: a leader commits only an index of its own
	// reign (maybeCommit).
	RuleCurrentReignCommit = "current-reign-commit"
	// RuleAcceptGrantee: a follower accepts appends only from the process
	// it grants to, or from anyone while it grants to no one (mayAccept).
	RuleAcceptGrantee = "accept-grantee"
	// RuleAcceptReign: a follower accepts appends only of a reign no older
	// than the highest it accepted (mayAccept).
	RuleAcceptReign = "accept-reign"
	// RuleReplyReign: a leader counts only replies to its own reign's
	// requests (onAppendReply, onFetchReply).
	RuleReplyReign = "reply-reign"
	// RuleQuarantineAppends: a process in its restart quarantine accepts
	// no append and no snapshot (mayAccept).
	RuleQuarantineAppends = "quarantine-appends"
	// RuleAcceptedReignMonotone: acceptedReign never decreases, snapshot
	// installs included (acceptReign, SnapshotInstalled).
	RuleAcceptedReignMonotone = "accepted-reign-monotone"
	// RuleNoTruncateCommitted: a follower never truncates at or below its
	// commit index (onAppend skips what it already committed).
	RuleNoTruncateCommitted = "no-truncate-committed"
	// RuleReignStartBeforeReads: no lease or follower read is answered
	// before the reign-start edict commits (leaseRead, onReadIndex).
	RuleReignStartBeforeReads = "reign-start-before-reads"
	// RuleFsyncBeforeAck: a reply that promises durability leaves only
	// after its batch is stored (onAppend).
	RuleFsyncBeforeAck = "fsync-before-ack"
	// RuleFollowerReadIndex: a follower read is answered only by the reply
	// to its own request, and only once the leader's index is applied
	// (onReadIndexReply).
	RuleFollowerReadIndex = "follower-read-index"
	// RuleFollowerReadSentAfterStart: a follower read is answered only by
	// a request sent after it started, never by one already in flight
	// (Read): that one may have reached the leader before a write
	// acknowledged before the read started was committed.
	RuleFollowerReadSentAfterStart = "follower-read-sent-after-start"
	// RuleIncarnationBump: a process bumps its incarnation durably before
	// it sends anything (Recover), so its readings grow across restarts
	// and a restarted process is quarantined.
	RuleIncarnationBump = "incarnation-bump"
	// RuleLearnCommittedOnly: a Committed Fetch is answered with committed
	// entries only (onCommittedFetch).
	RuleLearnCommittedOnly = "learn-committed-only"
	// RuleHeardLearns: a follower that knows its newest epoch only as
	// Heard takes the stop edict its news names as its stop proof (which
	// its wedge requests carry), commits it if its log holds it, and
	// otherwise fetches committed entries from any peer (hearEpoch,
	// learnCommitted).
	RuleHeardLearns = "heard-learns"
	// RuleMessagesWaitForRecords: a lease message leaves only once every
	// lease record its process handed to the store is durable, not only
	// the records of the step that sent it (drainElect).
	RuleMessagesWaitForRecords = "messages-wait-for-records"
	// RuleGrantsReportDurable: a grant reports the durable log position,
	// not the in-memory one (durablePosition).
	RuleGrantsReportDurable = "grants-report-durable"
	// RuleResetLowersDurable: a snapshot install that replaces the log
	// lowers the durable marks to the snapshot (SnapshotInstalled).
	RuleResetLowersDurable = "reset-lowers-durable"
	// RuleLeaderCountsDurable: a leader counts itself toward a commit only
	// for entries its own store holds (maybeCommit).
	RuleLeaderCountsDurable = "leader-counts-durable"
	// RuleRecoverInstall, an availability rule: a start after a crash
	// between a snapshot's publication and the log's reset completes the
	// install (Recover).
	RuleRecoverInstall = "recover-install"
	// RuleCompactBehindDurable: the log is compacted only behind what a
	// state machine that keeps its own state (fsm.DiskFSM) has made
	// durable: a snapshot of one records the index its Sync returned
	// (SyncState).
	RuleCompactBehindDurable = "compact-behind-durable"
	// RuleRecordBeforeAdopt: a state machine that stages a snapshot from a
	// leader in its own store (fsm.StagingFSM) installs it only once the
	// snapshot's metadata is recorded (StageSnapshot, then
	// SaveStagedSnapshot, then InstallStagedSnapshot), so that its state
	// is never ahead of what the log can describe.
	RuleRecordBeforeAdopt = "record-before-adopt"
	// RuleLeaderSucceeds, a liveness rule: a leader that ended its epoch
	// with a stop edict leads the next one at once if it is a member of
	// it, and otherwise hands it over to the member of it whose log is
	// the most up to date, once it has wedged its own epoch (succeed);
	// switched off, it steps down and the next epoch's detectors elect a
	// leader, 0.6-0.9 s later with the defaults.
	RuleLeaderSucceeds = "leader-succeeds"
	// RuleCarryLease, a liveness rule: a leader that is a member of the
	// next epoch keeps its lease while it wedges its own and campaigns in
	// the next (elect.Core.WedgeKeeping), and so serves reads and names
	// itself leader throughout; switched off, it gives the lease up
	// first, and no process leads for a few round trips.
	RuleCarryLease = "carry-lease"
	// RuleHeirServes, a liveness rule: a reign that follows this
	// process's own carried reign serves reads and takes proposals before
	// its reign-start edict commits (leader.heir); switched off, it waits
	// a round trip for it as any new reign does.
	RuleHeirServes = "heir-serves"
	// RuleRenewWhileEnding, a liveness rule: a leader whose stop edict
	// committed renews its lease until a quorum of the next epoch holds
	// the edict, while that quorum is live (nextEpochLive); switched off,
	// its lease lapses while a member catches up, and no one leads.
	RuleRenewWhileEnding = "renew-while-ending"
	// RuleRetireFirst, a liveness rule: a leader that removes itself
	// first commits its retirement (wire.EpochConfig.Retiring), hands
	// leadership to another member, and leaves the removal to it (retire);
	// switched off, it ends the epoch itself and hands the next one over
	// (succeed), and the gap is a wedge round trip longer than a transfer.
	RuleRetireFirst = "retire-first"
	// RuleHandOverAwaitsEpoch, a liveness rule: a hand-over's target that
	// knows the epoch only from news waits, up to MaxLease, for its log
	// to bring it before it campaigns (campaignUntil); switched off, it
	// campaigns at once, which the lease core refuses, and the hand-over
	// is lost to the detectors.
	RuleHandOverAwaitsEpoch = "hand-over-awaits-epoch"
	// RuleRetireSettled, a liveness rule: a retiring member that wins a
	// reign transfers leadership only once the reign has lasted MaxLease
	// (retire), when grants given to a rival before it have lapsed, or
	// every member granted the reign; switched off, it transfers at once,
	// and a rival still campaigning splits the vote with the target.
	RuleRetireSettled = "retire-settled"
	// RuleRenewForCatchUp, a liveness rule: a leader renewing while the
	// next epoch catches up counts only the members it can bring the log
	// (nextEpochLive); switched off, a member wedged by the next epoch's
	// news refuses its appends for good, and the leader renews forever.
	RuleRenewForCatchUp = "renew-for-catch-up"
	// RuleCleanRecordCleared: the clean-stop record speaks only for the
	// life right after the one that wrote it (Recover): the incarnation
	// bump that starts that life is what clears it. Switched off, any
	// later life takes it, so a crash of the life after a clean stop is
	// followed by a start without quarantine.
	RuleCleanRecordCleared = "clean-record-cleared"
)

// MutationRules lists the rules above in the order of docs/protocol.md.
var mutationRules = []string{
	RuleCurrentReignCommit, RuleAcceptGrantee, RuleAcceptReign, RuleReplyReign,
	RuleQuarantineAppends, RuleAcceptedReignMonotone, RuleNoTruncateCommitted,
	RuleReignStartBeforeReads, RuleFsyncBeforeAck, RuleFollowerReadIndex, RuleFollowerReadSentAfterStart,
	RuleIncarnationBump,
	RuleLearnCommittedOnly, RuleHeardLearns, RuleMessagesWaitForRecords, RuleGrantsReportDurable,
	RuleResetLowersDurable, RuleLeaderCountsDurable, RuleRecoverInstall, RuleCompactBehindDurable,
	RuleRecordBeforeAdopt, RuleLeaderSucceeds, RuleCarryLease, RuleHeirServes, RuleRenewWhileEnding, RuleRetireFirst, RuleHandOverAwaitsEpoch, RuleRetireSettled, RuleRenewForCatchUp, RuleCleanRecordCleared,
}
