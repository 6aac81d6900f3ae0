package wire

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// LeaseType names the lease protocol's messages.
type LeaseType uint8

const (
	// LeaseGrantRequest is ⟨grantRequest, p, Start_p, δ⟩ (§3 step 3); with
	// Wedge set it is grantRequest(⊥, ∞) of §10.6.
	LeaseGrantRequest LeaseType = iota + 1
	// LeaseGrant is ⟨ok, q, T_q, Start_p⟩ (§3 step 6.2 extended by §7).
	LeaseGrant
	// LeaseNack refuses a request and names the current grantee and what is
	// left of its grant (§10.2, §10.4).
	LeaseNack
	// LeaseRelease gives up p's grants (§6).
	LeaseRelease
	// LeaseRevoke withdraws an aborted attempt's grants (§10.2).
	LeaseRevoke
	// LeaseVerify is ⟨verifyLeadership, q, Start_q⟩ (§10.5 step 2).
	LeaseVerify
	// LeaseRemainder is ⟨remainder, p, δ, Start_q⟩ (§10.5 step 4).
	LeaseRemainder
	// LeaseDetector carries a weak leader election's own message (an
	// elect.Protocol's Outgoing payload), so that it travels with the lease
	// protocol's messages.
	LeaseDetector
)

// MaxDetectorPayload bounds a LeaseDetector's payload.
const MaxDetectorPayload = 64 << 10

var leaseTypeNames = [...]string{
	LeaseGrantRequest: "grantRequest",
	LeaseGrant:        "grant",
	LeaseNack:         "nack",
	LeaseRelease:      "release",
	LeaseRevoke:       "revoke",
	LeaseVerify:       "verify",
	LeaseRemainder:    "remainder",
	LeaseDetector:     "detector",
}

func (t LeaseType) String() string {
	if int(t) < len(leaseTypeNames) && leaseTypeNames[t] != "" {
		return leaseTypeNames[t]
	}
	return fmt.Sprintf("LeaseType(%d)", uint8(t))
}

// Valid reports whether t is a known message type.
func (t LeaseType) Valid() bool { return t >= LeaseGrantRequest && t <= LeaseDetector }

// Lease is one message of the lease protocol (package elect, which sends
// and receives it; a Message carries it between processes). It is a flat
// struct, as in etcd-raft, so that it encodes compactly and a transport
// can carry it without knowing the protocol; which fields matter depends
// on Type.
type Lease struct {
	Type  LeaseType       `codec:"y"`
	From  edict.ProcessID `codec:"f"`
	To    edict.ProcessID `codec:"o"`
	Epoch uint64          `codec:"e"`

	// Start is the sender's clock reading that names the exchange: Start_p
	// of a grant request (echoed in its grant or nack), Start_q of a verify
	// (echoed in its remainder), and the send time of a release or revoke.
	// A process's readings strictly increase, across restarts too, so Start
	// doubles as the per-sender sequence number that orders a sender's
	// grant requests, releases and revocations (§10.2 needs FIFO per
	// sender; we do not trust the transport for it).
	Start edict.Time `codec:"s"`

	// Delta is δ of a grant request, or the remainder's δ (§10.5 step 3).
	Delta time.Duration `codec:"d"`
	// Wedge marks grantRequest(⊥, ∞) (§10.6); Delta is then ignored.
	Wedge bool `codec:"w"`

	// T is T_q, the granter's reading when it granted (§7).
	T edict.Time `codec:"t"`

	// Grantee is A_q in a nack: whom q grants to, or None.
	Grantee edict.ProcessID `codec:"g"`
	// Remaining is F_q − T_q in a nack, measured on q's clock.
	Remaining time.Duration `codec:"r"`
	// Wedged reports, in a grant or nack, that q is wedged in Epoch.
	Wedged bool `codec:"x"`

	// LastIndex and LastStamp carry a log position for the log the lease
	// protocol serves (elect.Config.Log): in a grant, the granter's
	// durable log (elect.Log.Durable), so that a new reign starts from the
	// most up-to-date log of its quorum (docs/protocol.md, "The replicated
	// log"; elect.Event.Positions); in a wedge request, the stop edict its
	// sender knows committed (elect.Log.StopProof; the elect.StopNamed
	// event). The lease protocol itself never reads them.
	LastIndex uint64      `codec:"li"`
	LastStamp edict.Stamp `codec:"ls"`

	// Payload is a LeaseDetector's content, opaque to the lease protocol.
	Payload []byte `codec:"p"`

	// Newest, NewestMembers and NewestRan are the sender's epoch news,
	// which every message carries: the newest epoch whose configuration
	// the sender knows, its members (a majority quorum system), and
	// whether the sender runs in it, that is, knows every epoch before it
	// TERMINATED. A receiver that knows no epoch that new learns it
	// (EpochConfig.Heard); one that runs in an older epoch and is told the newer one
	// runs learns its own terminated. Every member of a running epoch so
	// comes to know it from any peer that does, without waiting for a
	// leader of the epoch to replicate the stop edict (docs/protocol.md, "Epochs and wedging").
	Newest        uint64            `codec:"n"`
	NewestMembers []edict.ProcessID `codec:"nm"`
	NewestRan     bool              `codec:"nr"`
	// NewestStopIndex and NewestStopStamp name the committed stop edict
	// that began the newest epoch, when the sender knows it (zero
	// otherwise). Only the process whose log committed the edict can know
	// it is committed; this carries that knowledge to every process that
	// holds the entry but never heard its commit, and tells one that lacks
	// it what to fetch from any peer (EpochConfig.StopIndex).
	NewestStopIndex uint64      `codec:"ni"`
	NewestStopStamp edict.Stamp `codec:"nst"`
}

func (m Lease) String() string {
	return fmt.Sprintf("%v %v→%v e%d start=%v δ=%v wedge=%t T=%v grantee=%v rem=%v wedged=%t",
		m.Type, m.From, m.To, m.Epoch, m.Start, m.Delta, m.Wedge, m.T, m.Grantee, m.Remaining, m.Wedged)
}

// Validate checks what a receiver can check without protocol state: a known
// type, real sender and receiver, no negative durations.
func (m Lease) Validate() error {
	switch {
	case !m.Type.Valid():
		return fmt.Errorf("wire: unknown message type %d", uint8(m.Type))
	case m.From == edict.None:
		return fmt.Errorf("wire: %v without a sender", m.Type)
	case m.To == edict.None:
		return fmt.Errorf("wire: %v without a receiver", m.Type)
	case m.Delta < 0:
		return fmt.Errorf("wire: %v with negative δ %v", m.Type, m.Delta)
	case m.Remaining < 0:
		return fmt.Errorf("wire: %v with negative remaining %v", m.Type, m.Remaining)
	case m.Type == LeaseGrantRequest && !m.Wedge && m.Delta == 0:
		return fmt.Errorf("wire: grant request with δ = 0")
	case m.Type != LeaseDetector && len(m.Payload) > 0:
		return fmt.Errorf("wire: %v with a detector payload", m.Type)
	case len(m.Payload) > MaxDetectorPayload:
		return fmt.Errorf("wire: detector payload of %d bytes exceeds %d", len(m.Payload), MaxDetectorPayload)
	case len(m.NewestMembers) > edict.MaxQTSize:
		return fmt.Errorf("wire: %v with news of %d members, limit %d", m.Type, len(m.NewestMembers), edict.MaxQTSize)
	case m.NewestRan && len(m.NewestMembers) == 0:
		return fmt.Errorf("wire: %v says epoch %d runs but names no members", m.Type, m.Newest)
	case m.NewestStopIndex != 0 && len(m.NewestMembers) == 0:
		return fmt.Errorf("wire: %v names the stop edict of epoch %d but not its members", m.Type, m.Newest)
	case (m.NewestStopIndex == 0) != m.NewestStopStamp.IsZero():
		return fmt.Errorf("wire: %v names the stop edict of epoch %d by index %d and stamp %v: both or neither", m.Type, m.Newest, m.NewestStopIndex, m.NewestStopStamp)
	}
	for i, p := range m.NewestMembers {
		if p == edict.None || i > 0 && m.NewestMembers[i-1] >= p {
			return fmt.Errorf("wire: %v with news of epoch %d whose members %v are not sorted, distinct processes", m.Type, m.Newest, m.NewestMembers)
		}
	}
	return nil
}
