package wire

import (
	"errors"
	"fmt"
	"math"

	"github.com/edictlog/edictlog/edict"
)

// Kind names what a Message carries.
type Kind uint8

const (
	// KindLease: a lease protocol message (Lease).
	KindLease Kind = iota + 1
	// KindAppend: the leader replicates entries (or, with none, heartbeats
	// its commit index).
	KindAppend
	// KindAppendReply: a follower answers an Append.
	KindAppendReply
	// KindReadIndex: a follower asks the leader for its commit index to
	// serve a follower read (docs/protocol.md, "The replicated log").
	KindReadIndex
	// KindReadIndexReply: the leader's answer, given under its lease.
	KindReadIndexReply
	// KindTimeoutNow: leadership transfer — the target starts OQwBD at once.
	KindTimeoutNow
	// KindFetch: a new leader asks the holder of its quorum's most
	// up-to-date log for the entries it lacks (docs/protocol.md, "The replicated log", starting a reign).
	KindFetch
	// KindFetchReply: the entries asked for.
	KindFetchReply
)

var kindNames = [...]string{
	KindLease:          "lease",
	KindAppend:         "append",
	KindAppendReply:    "appendReply",
	KindReadIndex:      "readIndex",
	KindReadIndexReply: "readIndexReply",
	KindTimeoutNow:     "timeoutNow",
	KindFetch:          "fetch",
	KindFetchReply:     "fetchReply",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k >= KindLease && k <= KindFetchReply }

// Bulk reports whether messages of kind k carry entries. A transport
// carries them apart from everything else (TCP: their own connection,
// windowed, and their own queue at the receiver), so that lease messages
// never wait behind them.
func (k Kind) Bulk() bool { return k == KindAppend || k == KindFetchReply }

// Limits every decoded message is held to, whatever the frame size. They
// bound what a hostile peer can make a receiver allocate: a wire entry is a
// few bytes but its decoded form is about a hundred.
const (
	// MaxAppendEntries bounds the entries of one Append. The log layer
	// batches below it (hashicorp/raft caps at 1024, etcd by bytes).
	MaxAppendEntries = 8192
	// MaxMembers bounds the member list of a SnapshotHeader.
	MaxMembers = edict.MaxQTSize
)

// Message is what a Transport carries between two processes: exactly one
// of a lease message or a log message, addressed From → To. It is a tagged
// union of pointers (etcd-raft keeps one flat struct; the log messages here
// differ enough that separate small types read better).
//
// A transport encodes a Message inside Send, so a sender may reuse the
// payload as soon as Send returns, and every receiver gets its own copy.
type Message struct {
	From edict.ProcessID
	To   edict.ProcessID

	Lease          *Lease
	Append         *Append
	AppendReply    *AppendReply
	ReadIndex      *ReadIndexRequest
	ReadIndexReply *ReadIndexReply
	TimeoutNow     *TimeoutNow
	Fetch          *Fetch
	FetchReply     *FetchReply
}

// LeaseMessage wraps a lease protocol message, addressed as it says.
func LeaseMessage(m Lease) Message {
	return Message{From: m.From, To: m.To, Lease: &m}
}

// Kind returns what m carries, or 0 if it carries nothing or more than one
// payload (Validate says which).
func (m Message) Kind() Kind {
	k, n := Kind(0), 0
	if m.Lease != nil {
		k, n = KindLease, n+1
	}
	if m.Append != nil {
		k, n = KindAppend, n+1
	}
	if m.AppendReply != nil {
		k, n = KindAppendReply, n+1
	}
	if m.ReadIndex != nil {
		k, n = KindReadIndex, n+1
	}
	if m.ReadIndexReply != nil {
		k, n = KindReadIndexReply, n+1
	}
	if m.TimeoutNow != nil {
		k, n = KindTimeoutNow, n+1
	}
	if m.Fetch != nil {
		k, n = KindFetch, n+1
	}
	if m.FetchReply != nil {
		k, n = KindFetchReply, n+1
	}
	if n != 1 {
		return 0
	}
	return k
}

func (m Message) String() string {
	switch m.Kind() {
	case KindLease:
		return m.Lease.String()
	case KindAppend:
		a := m.Append
		return fmt.Sprintf("append %v→%v e%d prev=%d entries=%d commit=%d", m.From, m.To, a.Epoch, a.PrevIndex, len(a.Entries), a.LeaderCommit)
	case KindAppendReply:
		r := m.AppendReply
		return fmt.Sprintf("appendReply %v→%v e%d reign=%v ok=%t refused=%t last=%d hint=%d", m.From, m.To, r.Epoch, r.Reign, r.Success, r.Refused, r.LastIndex, r.HintIndex)
	case KindReadIndex:
		return fmt.Sprintf("readIndex %v→%v e%d id=%d", m.From, m.To, m.ReadIndex.Epoch, m.ReadIndex.ID)
	case KindReadIndexReply:
		r := m.ReadIndexReply
		return fmt.Sprintf("readIndexReply %v→%v e%d id=%d ok=%t index=%d", m.From, m.To, r.Epoch, r.ID, r.OK, r.Index)
	case KindTimeoutNow:
		return fmt.Sprintf("timeoutNow %v→%v e%d", m.From, m.To, m.TimeoutNow.Epoch)
	case KindFetch:
		f := m.Fetch
		return fmt.Sprintf("fetch %v→%v e%d id=%d prev=%d max=%d committed=%t upTo=%d", m.From, m.To, f.Epoch, f.ID, f.PrevIndex, f.Max, f.Committed, f.UpToIndex)
	case KindFetchReply:
		r := m.FetchReply
		return fmt.Sprintf("fetchReply %v→%v e%d id=%d ok=%t compacted=%t last=%d entries=%d committed=%t commit=%d", m.From, m.To, r.Epoch, r.ID, r.OK, r.Compacted, r.LastIndex, len(r.Entries), r.Committed, r.Commit)
	}
	return fmt.Sprintf("invalid message %v→%v", m.From, m.To)
}

// Validate checks what a receiver can check without protocol state: one
// payload, real sender and receiver that agree with a lease payload's own,
// and each payload's structure. Decoders call it; so does Send, so that a
// bug shows at the sender rather than as a refused frame at the receiver.
// Address fills in m's envelope for a send from self to to, as
// log.Transport's Send promises (a zero From or To is the sender or the
// destination), and refuses an envelope that names another sender or
// destination: a transport never delivers a message for one process to
// another, nor accepts one claiming another sender.
func (m *Message) Address(self, to edict.ProcessID) error {
	if m.From == edict.None {
		m.From = self
	}
	if m.To == edict.None {
		m.To = to
	}
	if m.From != self {
		return fmt.Errorf("wire: message from %v, but this is %v", m.From, self)
	}
	if m.To != to {
		return fmt.Errorf("wire: message addressed to %v sent to %v", m.To, to)
	}
	return nil
}

func (m Message) Validate() error {
	if m.From == edict.None {
		return errors.New("wire: message without a sender")
	}
	if m.To == edict.None {
		return errors.New("wire: message without a receiver")
	}
	var err error
	switch m.Kind() {
	case KindLease:
		err = m.Lease.Validate()
		if err == nil {
			err = checkStamps(m.Lease.LastStamp, m.Lease.NewestStopStamp)
		}
		if err == nil && (m.Lease.From != m.From || m.Lease.To != m.To) {
			err = fmt.Errorf("lease message %v→%v in an envelope %v→%v", m.Lease.From, m.Lease.To, m.From, m.To)
		}
	case KindAppend:
		err = m.Append.Validate()
	case KindAppendReply:
		err = m.AppendReply.Validate()
	case KindReadIndex:
		err = m.ReadIndex.Validate()
	case KindReadIndexReply:
		err = m.ReadIndexReply.Validate()
	case KindTimeoutNow:
		err = m.TimeoutNow.Validate()
	case KindFetch:
		err = m.Fetch.Validate()
	case KindFetchReply:
		err = m.FetchReply.Validate()
	default:
		return errors.New("wire: message must carry exactly one payload")
	}
	if err != nil {
		return fmt.Errorf("wire: %v from %v: %w", m.Kind(), m.From, err)
	}
	return nil
}

// Append replicates Entries, which follow (PrevIndex, PrevStamp) in the
// leader's log, and tells the follower how far the leader has committed.
// With no entries it is a heartbeat that also probes log matching.
type Append struct {
	Epoch        uint64
	Reign        edict.Stamp // the leader's reign; compared with acceptedReign
	LeaderCommit uint64
	PrevIndex    uint64
	PrevStamp    edict.Stamp
	// Entries are contiguous: Entries[i].Index == PrevIndex+1+i. The wire
	// form relies on it and carries no per-entry index.
	Entries []Entry
}

// Validate checks the structure of a: a reign, contiguous entries within
// MaxAppendEntries and well-formed stamps.
func (a *Append) Validate() error {
	if a.Reign.IsZero() {
		return errors.New("append without a reign")
	}
	if len(a.Entries) > MaxAppendEntries {
		return fmt.Errorf("%d entries exceeds the limit of %d", len(a.Entries), MaxAppendEntries)
	}
	if a.PrevIndex > math.MaxUint64-uint64(len(a.Entries)) {
		return fmt.Errorf("entries after index %d overflow the index space", a.PrevIndex)
	}
	if err := checkStamps(a.Reign, a.PrevStamp); err != nil {
		return err
	}
	return checkRun(a.Entries, a.PrevIndex+1)
}

// checkRun checks that es are well-formed entries at consecutive indexes
// from first: what an Append and a FetchReply carry.
func checkRun(es []Entry, first uint64) error {
	for i := range es {
		e := &es[i]
		if want := first + uint64(i); e.Index != want {
			return fmt.Errorf("entry %d has index %d, want %d (entries must follow one another contiguously from index %d)", i, e.Index, want, first)
		}
		if err := e.Check(); err != nil {
			return err
		}
	}
	return nil
}

// AppendReply answers an Append.
type AppendReply struct {
	Epoch uint64
	// Reign is the reign of the Append this reply answers: a leader counts
	// only replies to its own reign's appends. A reply that arrives late,
	// after its leader lost and regained leadership, answers an earlier
	// reign and is dropped.
	Reign edict.Stamp
	// Accepted is the highest reign the follower has accepted; a stale
	// leader learns from it that it has been superseded.
	Accepted edict.Stamp
	Success  bool
	// Refused, on failure, says the follower did not consider the append
	// at all (docs/protocol.md, "The replicated log"'s acceptance rule: it grants to another process,
	// or Reign is newer than the append's): not a log mismatch, so the
	// leader must not back up.
	Refused bool
	// LastIndex is, on success, the last index the reply acknowledges
	// (PrevIndex+len(Entries), now durable at the follower); on failure,
	// the PrevIndex that did not match.
	LastIndex uint64
	// HintIndex and HintStamp, on failure only, are the follower's guess at
	// the latest index below LastIndex where its log may match the
	// leader's, and its stamp there (etcd-raft's RejectHint and LogTerm),
	// so the leader backs up in one step rather than one entry at a time.
	HintIndex uint64
	HintStamp edict.Stamp
}

// Validate checks the structure of r.
func (r *AppendReply) Validate() error {
	if r.Reign.IsZero() {
		return errors.New("append reply without the reign it answers")
	}
	if err := checkStamps(r.Reign, r.Accepted, r.HintStamp); err != nil {
		return err
	}
	if r.Success {
		if r.HintIndex != 0 || !r.HintStamp.IsZero() || r.Refused {
			return errors.New("successful append reply with a rejection hint or refusal")
		}
		return nil
	}
	if r.LastIndex != 0 && r.HintIndex >= r.LastIndex {
		return fmt.Errorf("rejection hint %d not below the rejected index %d", r.HintIndex, r.LastIndex)
	}
	return nil
}

// ReadIndexRequest asks the leader for its commit index (a follower read,
// docs/protocol.md, "The replicated log"). ID and Sent, the requester's reading when it asked, name the
// request: readings increase across restarts (the incarnation), so a reply
// meant for an earlier life of the requester never answers a new read.
type ReadIndexRequest struct {
	Epoch uint64
	ID    uint64
	Sent  edict.Time
}

// Validate checks the structure of r.
func (r *ReadIndexRequest) Validate() error {
	if r.ID == 0 {
		return errors.New("read index request without an id")
	}
	return nil
}

// ReadIndexReply answers a ReadIndexRequest. With OK, Index is the leader's
// commit index when the request arrived, answered while its lease held;
// otherwise Leader names the process the answerer believes leads (or ⊥).
type ReadIndexReply struct {
	Epoch  uint64
	ID     uint64
	Sent   edict.Time // the request's, echoed
	Reign  edict.Stamp
	OK     bool
	Index  uint64
	Leader edict.ProcessID
}

// Validate checks the structure of r.
func (r *ReadIndexReply) Validate() error {
	if r.ID == 0 {
		return errors.New("read index reply without an id")
	}
	if r.OK && r.Reign.IsZero() {
		return errors.New("positive read index reply without a reign")
	}
	return checkStamps(r.Reign)
}

// TimeoutNow tells a transfer target to start OQwBD at once (docs/protocol.md, "The replicated log",
// leadership transfer). Reign is the transferring leader's, so a target can
// ignore a transfer from a superseded reign.
type TimeoutNow struct {
	Epoch uint64
	Reign edict.Stamp
}

// Validate checks the structure of t.
func (t *TimeoutNow) Validate() error {
	if t.Reign.IsZero() {
		return errors.New("timeout-now without a reign")
	}
	return checkStamps(t.Reign)
}

// Fetch asks for up to Max entries after (PrevIndex, PrevStamp): a new
// leader fetching what its quorum's most up-to-date log has and its own
// lacks, before it appends its reign-start edict (docs/protocol.md, "The replicated log"). ID correlates
// the reply.
//
// A Committed fetch comes instead from a process catching up on committed
// entries only, from any peer: one that knows the newest epoch only from
// a peer's news, whose log may lack the stop edict that began it (issue
// 14). The answer holds entries the answerer knows committed: up to its
// commit index, or up to (UpToIndex, UpToStamp), the stop edict the
// asker's news named committed, if the answerer's log holds that entry.
type Fetch struct {
	Epoch uint64
	ID    uint64
	// Attempt is Start_p of the lease instance that began the fetching
	// reign: with ID it names the request, so a reply to an earlier
	// reign's fetch (whose IDs also started at 1) is dropped.
	Attempt   edict.Time
	PrevIndex uint64
	PrevStamp edict.Stamp
	Max       uint32
	Committed bool
	UpToIndex uint64
	UpToStamp edict.Stamp
}

// Validate checks the structure of f.
func (f *Fetch) Validate() error {
	switch {
	case f.ID == 0:
		return errors.New("fetch without an id")
	case !f.Committed && f.UpToIndex != 0:
		return errors.New("fetch names a committed position but is not a committed fetch")
	case (f.UpToIndex == 0) != f.UpToStamp.IsZero():
		return fmt.Errorf("fetch names a committed position by index %d and stamp %v: both or neither", f.UpToIndex, f.UpToStamp)
	}
	return checkStamps(f.PrevStamp, f.UpToStamp)
}

// FetchReply answers a Fetch. With OK, the logs matched at the fetch's
// PrevIndex and Entries follow it; Compacted says the entries asked for are
// only in a snapshot now. LastIndex and LastStamp are the answerer's log
// position either way.
type FetchReply struct {
	Epoch     uint64
	ID        uint64
	Attempt   edict.Time // the request's, echoed
	LastIndex uint64
	LastStamp edict.Stamp
	Compacted bool
	OK        bool
	// Entries are contiguous (each index one more than the one before),
	// at most MaxAppendEntries.
	Entries []Entry
	// Committed answers a committed fetch: every entry is at or below
	// Commit, the highest index the answerer knows committed.
	Committed bool
	Commit    uint64
}

// Validate checks the structure of r.
func (r *FetchReply) Validate() error {
	switch {
	case r.ID == 0:
		return errors.New("fetch reply without an id")
	case len(r.Entries) > MaxAppendEntries:
		return fmt.Errorf("%d entries exceeds the limit of %d", len(r.Entries), MaxAppendEntries)
	case len(r.Entries) > 0 && !r.OK:
		return errors.New("fetch reply with entries but without OK")
	case !r.Committed && r.Commit != 0:
		return errors.New("fetch reply names a commit index but answers no committed fetch")
	case r.Committed && len(r.Entries) > 0 && r.Entries[len(r.Entries)-1].Index > r.Commit:
		return fmt.Errorf("committed fetch reply with entries up to %d beyond its commit index %d", r.Entries[len(r.Entries)-1].Index, r.Commit)
	}
	if err := checkStamps(r.LastStamp); err != nil {
		return err
	}
	if len(r.Entries) == 0 {
		return nil
	}
	first := r.Entries[0].Index
	if first == 0 || first > math.MaxUint64-uint64(len(r.Entries)-1) {
		return fmt.Errorf("entries from index %d", first)
	}
	return checkRun(r.Entries, first)
}

// SnapshotHeader heads a streamed snapshot: what the Size bytes that follow
// stand for. It travels on a connection of its own, never as a Message.
type SnapshotHeader struct {
	Epoch uint64
	// Reign is the sending leader's, checked like an Append's.
	Reign edict.Stamp
	// LastIndex and LastStamp name the last entry the snapshot covers; log
	// matching resumes after them.
	LastIndex uint64
	LastStamp edict.Stamp
	// Members and Learners of the epoch at LastIndex, in increasing order:
	// a follower that installs the snapshot skips the config edicts that
	// named them.
	Members  []edict.ProcessID
	Learners []edict.ProcessID
	// Size is the exact length of the snapshot stream in bytes.
	Size int64
	// Addrs are the transport addresses the sender knows of the processes
	// Members and Learners name. The config edicts a snapshot spans are
	// where a process otherwise learns how to reach a process they added;
	// without them, a follower that later leads could not reach it.
	Addrs map[edict.ProcessID]string
}

// Validate checks the structure of s.
func (s *SnapshotHeader) Validate() error {
	switch {
	case s.Reign.IsZero():
		return errors.New("wire: snapshot without a reign")
	case s.LastIndex == 0:
		return errors.New("wire: snapshot with last index 0")
	case s.Size < 0:
		return fmt.Errorf("wire: snapshot with negative size %d", s.Size)
	}
	if err := checkIDs("member", s.Members); err != nil {
		return err
	}
	if err := checkIDs("learner", s.Learners); err != nil {
		return err
	}
	if err := CheckAddrs(s.Addrs, s.Members, s.Learners); err != nil {
		return fmt.Errorf("wire: snapshot %w", err)
	}
	if err := checkStamps(s.Reign, s.LastStamp); err != nil {
		return fmt.Errorf("wire: %w", err)
	}
	return nil
}

// checkStamps checks the structure every stamp must have whatever its
// epoch (edict.Stamp.WellFormed). Whether a stamp covers a quorum of its
// epoch is for the log layer (edict.Stamp.Validate).
func checkStamps(stamps ...edict.Stamp) error {
	for _, s := range stamps {
		if err := s.WellFormed(); err != nil {
			return err
		}
	}
	return nil
}

// checkIDs checks a snapshot's member or learner list: bounded, no ⊥,
// strictly increasing.
func checkIDs(what string, ids []edict.ProcessID) error {
	if len(ids) > MaxMembers {
		return fmt.Errorf("wire: snapshot names %d %ss, limit %d", len(ids), what, MaxMembers)
	}
	for i, p := range ids {
		if p == edict.None {
			return fmt.Errorf("wire: snapshot %s list names process 0 (⊥)", what)
		}
		if i > 0 && ids[i-1] >= p {
			return fmt.Errorf("wire: snapshot %s list not strictly increasing at position %d", what, i)
		}
	}
	return nil
}
