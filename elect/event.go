package elect

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// EventKind names what happened inside the core.
type EventKind uint8

const (
	// LeaseAcquired: an OQwBD/OQwBS instance completed (step 8); E_p moved.
	// NewReign is set when it starts a reign (docs/protocol.md, "The replicated log"): the process was
	// not leader at completion and the instance started after its previous
	// lease lapsed. Otherwise it renewed the current reign.
	LeaseAcquired EventKind = iota + 1
	// LeaseLost: C_p reached E_p, or the lease was released.
	LeaseLost
	// LeaderVerified: a §10.5 verification answered. Until is a reading of
	// this process's clock before which Leader is guaranteed to hold the
	// lease (unless it releases it); zero if Leader said it is not leader.
	LeaderVerified
	// EpochTerminated: a quorum of the epoch is wedged (§10.6).
	EpochTerminated
	// EpochHeard: a peer's news named an epoch newer than any this process
	// knew, with its Members; the core now knows it as Heard. The runtime
	// records the configuration durably (a wedge or termination in it is
	// persisted, and New needs the epoch to restore them).
	EpochHeard
	// StopNamed: a peer's wedge request named, in StopIndex and StopStamp,
	// the stop edict it knows committed (Log.StopProof). A log holding that
	// very entry may commit everything up to it (Log Matching).
	StopNamed
	// Retired: this process, retiring (Core.Retire), holds no live grant
	// any more by its own clock; once the runtime has recorded so
	// durably, the next life may start without the restart quarantine.
	// Reported once.
	Retired
)

func (k EventKind) String() string {
	switch k {
	case LeaseAcquired:
		return "lease-acquired"
	case LeaseLost:
		return "lease-lost"
	case LeaderVerified:
		return "leader-verified"
	case EpochTerminated:
		return "epoch-terminated"
	case EpochHeard:
		return "epoch-heard"
	case StopNamed:
		return "stop-named"
	case Retired:
		return "retired"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event reports a change of leadership state.
type Event struct {
	Kind     EventKind
	Epoch    uint64
	QT       edict.QT   // LeaseAcquired: the instance's quorum timestamp
	Reign    edict.QT   // LeaseAcquired: the QT of the reign's first instance
	NewReign bool       // LeaseAcquired
	Expiry   edict.Time // LeaseAcquired: E_p
	// Start is Start_p of the completed instance (LeaseAcquired), naming
	// the grants whose readings form QT.
	Start  edict.Time
	Leader edict.ProcessID
	Until  edict.Time // LeaderVerified
	// Members are an EpochHeard epoch's members (a majority quorum
	// system).
	Members []edict.ProcessID
	// StopIndex and StopStamp: an EpochHeard epoch's stop edict, when
	// the news named it (wire.EpochConfig.StopIndex); an epoch already heard is
	// reported again when news first names its stop edict. StopNamed: the
	// stop edict a wedge request named.
	StopIndex uint64
	StopStamp edict.Stamp
	// Positions are, on LeaseAcquired, the log positions the instance's
	// granters reported (Log.Durable), one for every process of QT but
	// this one.
	Positions map[edict.ProcessID]wire.Position
}

// Stats counts what became of this process's leases, for metrics.
type Stats struct {
	// Renewals counts the renewal attempts a leader started; RenewalsLate
	// those that started more than a round trip after they were due (a
	// tick that came late: the process was busy or starved).
	Renewals, RenewalsLate uint64
	// Leases lost, by cause: LostExpired, the lease ran out unrenewed;
	// LostReleased, given up (Release: a step-down, a transfer, a
	// shutdown, an ending epoch); LostSuspended, given up because the
	// host was suspended while leading (ReleaseSuspended).
	LostExpired, LostReleased, LostSuspended uint64
	// LostLate counts the LostExpired leases this process lost through
	// its own slowness (a renewal that started late, an end noticed late),
	// after each of which it stood aside for MaxLease so that a healthy
	// member could lead.
	LostLate uint64
	// LastGrant is, per peer, the reading at which this process last
	// received its grant (renewals included).
	LastGrant map[edict.ProcessID]edict.Time
	// Stall is the longest delay lease renewals met that this process
	// saw in the last 30 to 60 s: as leader, from a renewal falling due
	// to its completion, or how long its ticks stopped when it lost a
	// lease unrenewed; as granter, how late the leader's renewals came.
	// Zero when there was none.
	Stall time.Duration
	// RenewLead is how long before its lease ends this process renews it
	// (the lease it holds), or would if it led now: Config.RenewLead (at
	// least three round trips), or twice Stall if that is longer, up to
	// MaxLease less the renewals' spacing; the lease it asks for is as
	// much longer, up to MaxLease.
	RenewLead time.Duration
}
