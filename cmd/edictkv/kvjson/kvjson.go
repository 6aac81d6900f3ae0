// Package kvjson is the contract of edictkv's HTTP+JSON API: the bodies of
// its requests and answers, the headers it sets and the error codes it
// answers with. The server (cmd/edictkv/internal/httpapi), edictkv's own
// client commands and the Jepsen harness all use these types, so that a
// field renamed on one side is a compile error on the other.
//
// It is plain data and imports only the standard library: a client takes
// it without the server or the log. docs/edictkv.md describes the
// endpoints; each type says which answers or requests it is the body of.
//
// Compatibility: fields are only added, never renamed or retyped, and an
// Code's string never changes meaning. A client should ignore fields it
// does not know (encoding/json does).
package kvjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Response headers. Every KV answer carries the revision it reflects and,
// when a value is involved, the edict stamp of that value.
const (
	HeaderIndex       = "X-Edictkv-Index"       // the state's revision: after a write; for a read, the one it reflects
	HeaderModIndex    = "X-Edictkv-Mod-Index"   // the revision that last wrote the value (its mod_revision)
	HeaderStamp       = "X-Edictkv-Stamp"       // the value's edict stamp, as StampJSON.Token
	HeaderConsistency = "X-Edictkv-Consistency" // how a read was served: lease, follower or stale
	HeaderServedBy    = "X-Edictkv-Served-By"   // the process that served the request
	// HeaderPartition is "minority" on a stale read served in a minority
	// partition (a non-authoritative local leader, --detector fetzer).
	HeaderPartition = "X-Edictkv-Partition"
	// HeaderForwardedBy marks a request one process forwarded to another
	// (the leader); a process that does not lead answers it 421 rather
	// than forwarding it again.
	HeaderForwardedBy = "X-Edictkv-Forwarded-By"
)

// Error codes of ErrorJSON.Code: stable strings a client can switch on.
const (
	CodeInvalidKey       = "invalid_key"
	CodeKeyTooLarge      = "key_too_large"
	CodeValueTooLarge    = "value_too_large"
	CodeBadParameter     = "bad_parameter"
	CodeUnknownParameter = "unknown_parameter"
	CodeMalformedJSON    = "malformed_json"
	CodeInvalidRequest   = "invalid_request"
	CodeNotFound         = "not_found"
	CodeCASFailed        = "cas_failed"
	// CodeCompacted: a read at a revision whose state is no longer kept
	// (410); ErrorJSON.Index is the current revision.
	CodeCompacted = "compacted"
	// CodeFutureRevision: a read at a revision not yet applied (400);
	// ErrorJSON.Index is the current revision.
	CodeFutureRevision = "future_revision"
	// CodeNoSpace: a write that puts was refused (507) because it would
	// take the state over its space quota (--quota-backend-bytes), or
	// because the NOSPACE alarm is active; nothing was written. Deletes
	// and compactions go on; once a compaction and a defragmentation
	// have made room, deactivating the alarm lets writes in again.
	CodeNoSpace = "no_space"
	// CodeCorrupt: the CORRUPT alarm is active and the state refuses
	// every KV request (500) until it is deactivated.
	CodeCorrupt = "corrupt"
	// CodeQuorumLost: a membership change refused (503) because the
	// configuration it asks for would have no quorum among the members
	// the leader hears from (etcd's "unhealthy cluster", its strict
	// reconfiguration check). Nothing changed; it may succeed once the
	// members it needs answer again.
	CodeQuorumLost     = "quorum_lost"
	CodeNoLeader       = "no_leader"
	CodeNotLeader      = "not_leader"
	CodeOutcomeUnknown = "outcome_unknown"
	CodeNotCommitted   = "not_committed"
	CodeMethod         = "method_not_allowed"
	CodeNoEndpoint     = "no_endpoint"
	CodeShuttingDown   = "shutting_down"
	CodeInternal       = "internal"
)

// ErrorJSON is the body of every error answer.
type ErrorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Index is the state's revision the answer reflects, where one is known
	// (a 404, a 409, a refused revision).
	Index uint64 `json:"index,omitempty"`
	// Current is the key's state when a compare-and-swap failed (absent
	// if the key does not exist).
	Current *KVJSON `json:"current,omitempty"`
	// CompactRevision, with CodeCompacted on a watch, is the compaction
	// revision: the oldest a watch may start from now.
	CompactRevision uint64 `json:"compact_revision,omitempty"`
}

// ReadingJSON is one (process, clock reading) of a quorum timestamp.
type ReadingJSON struct {
	Process     uint64 `json:"process"`
	Incarnation uint64 `json:"incarnation"`
	Nanos       int64  `json:"nanos"`
}

// StampJSON is an edict stamp (epoch, quorum timestamp, counter). Token is
// the stamp's binary encoding (edict.EncodeStamp) in unpadded base64url:
// pass it to edict.DecodeStamp to use the stamp as a fencing token.
type StampJSON struct {
	Epoch   uint64        `json:"epoch"`
	QT      []ReadingJSON `json:"qt"`
	Counter uint64        `json:"counter"`
	Token   string        `json:"token"`
}

// KVJSON is a key's state. Value holds a UTF-8 value; any other value is in
// ValueBase64 instead (JSON strings cannot carry arbitrary bytes).
// CreateIndex and ModIndex are etcd's create_revision and mod_revision
// (the names are kept from when revisions were log indexes); Stamp is the
// edict stamp of the entry that made ModIndex.
type KVJSON struct {
	Key         string    `json:"key"`
	Value       *string   `json:"value,omitempty"`
	ValueBase64 string    `json:"value_base64,omitempty"`
	CreateIndex uint64    `json:"create_index"`
	ModIndex    uint64    `json:"mod_index"`
	Version     uint64    `json:"version"`
	Stamp       StampJSON `json:"stamp"`
}

// GetResponse answers GET /v1/kv/<key>.
type GetResponse struct {
	KVJSON
	// Index is the state's revision the answer reflects at least (the
	// revision asked for, with ?revision).
	Index uint64 `json:"index"`
	// Consistency is how the read was served; a follower read answered by
	// the leader itself is served as a lease read.
	Consistency string `json:"consistency"`
	// StalenessMS bounds, for a stale read, how old the answer may be (-1:
	// no leader heard from since this process started).
	StalenessMS *int64 `json:"staleness_ms,omitempty"`
	// LocalLeader, on a stale read under an election with local leaders
	// (--detector fetzer), is this process's partition's leader; when it
	// is not authoritative the process is in a minority partition and the
	// answer may be arbitrarily old.
	LocalLeader *LocalLeaderJSON `json:"local_leader,omitempty"`
}

// LocalLeaderJSON is the leader of this process's partition under an
// election with local leaders (Nerio §10.3): Authoritative when its
// support is a majority of the members. A non-authoritative local leader
// leads nothing: it only says a minority partition has formed, whose
// processes serve stale reads alone.
type LocalLeaderJSON struct {
	ID            uint64   `json:"id"`
	Support       []uint64 `json:"support"`
	Authoritative bool     `json:"authoritative"`
}

// WriteResponse answers a PUT or DELETE that took effect.
type WriteResponse struct {
	Key string `json:"key"`
	// Index is the state's revision after the write (the value's
	// mod_index for a PUT).
	Index uint64 `json:"index"`
	// Stamp is the write's edict stamp: the value's stamp for a PUT.
	Stamp StampJSON `json:"stamp"`
	// Deleted counts the keys a DELETE removed.
	Deleted uint64 `json:"deleted,omitempty"`
	// Prev is the key's state before the write, if it existed.
	Prev *KVJSON `json:"prev,omitempty"`
}

// StatusJSON is one process's own view (GET /v1/status).
type StatusJSON struct {
	ID       uint64 `json:"id"`
	Epoch    uint64 `json:"epoch"`
	Leader   uint64 `json:"leader"` // 0: none known
	IsLeader bool   `json:"is_leader"`
	// LeaseRemainingMS is, at the leader, how long its lease still runs.
	LeaseRemainingMS *int64   `json:"lease_remaining_ms,omitempty"`
	Commit           uint64   `json:"commit"`
	Applied          uint64   `json:"applied"`
	FirstIndex       uint64   `json:"first_index"`
	LastIndex        uint64   `json:"last_index"`
	Members          []uint64 `json:"members"`
	Learners         []uint64 `json:"learners"`
	Ready            bool     `json:"ready"`
	// LocalLeader is this process's partition's leader under an election
	// with local leaders (--detector fetzer); not authoritative in a
	// minority partition.
	LocalLeader *LocalLeaderJSON `json:"local_leader,omitempty"`
}

// MemberJSON is one process in GET /v1/cluster.
type MemberJSON struct {
	ID       uint64 `json:"id"`
	Role     string `json:"role"` // member or learner
	HTTPAddr string `json:"http_addr,omitempty"`
	// GRPCAddr is where it serves the etcd v3 API, if it does.
	GRPCAddr string `json:"grpc_addr,omitempty"`
	// Match is, when the answering process leads, the highest index the
	// leader knows this process has stored.
	Match *uint64 `json:"match,omitempty"`
	// Status is the process's own view, asked for when /v1/cluster was
	// served; StatusError says why it is missing.
	Status      *StatusJSON `json:"status,omitempty"`
	StatusError string      `json:"status_error,omitempty"`
}

// ClusterJSON answers GET /v1/cluster.
type ClusterJSON struct {
	Self             uint64       `json:"self"`
	Epoch            uint64       `json:"epoch"`
	Leader           uint64       `json:"leader"`
	LeaderHTTPAddr   string       `json:"leader_http_addr,omitempty"`
	LeaseRemainingMS *int64       `json:"lease_remaining_ms,omitempty"`
	Members          []MemberJSON `json:"members"`
}

// Admin requests: JSON bodies of POST /v1/cluster/..., which the server
// decodes strictly (an unknown field is refused).

// TransferRequest asks the leader to hand leadership to ID (0: the most
// up-to-date other member): POST /v1/cluster/transfer.
type TransferRequest struct {
	ID uint64 `json:"id"`
}

// LearnerRequest adds process ID as a learner: RaftAddr is its transport
// address, HTTPAddr its API address, which the member directory records
// first so that every process can forward to it. POST
// /v1/cluster/learners.
type LearnerRequest struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// AddressesRequest records where process ID serves its APIs in the member
// directory, replicated. Every process with the etcd API on publishes its
// own at start, so that the others can forward to it and list it; an
// empty address is left as it is. POST /v1/cluster/addresses.
type AddressesRequest struct {
	ID       uint64 `json:"id"`
	HTTPAddr string `json:"http_addr,omitempty"`
	GRPCAddr string `json:"grpc_addr,omitempty"`
}

// MemberRequest names one process: POST /v1/cluster/promote and
// /v1/cluster/remove.
type MemberRequest struct {
	ID uint64 `json:"id"`
}

// RecoverRequest forces a new epoch from Survivors after a quorum is lost
// for good: POST /v1/cluster/recover. Confirm must be ConfirmRecovery:
// the operation is unsafe if any process left out is alive.
type RecoverRequest struct {
	Survivors []uint64 `json:"survivors"`
	Confirm   string   `json:"confirm"`
}

// ConfirmRecovery is the confirmation RecoverRequest.Confirm must carry.
const ConfirmRecovery = "I understand this can lose acknowledged writes"

// AdminResponse answers an admin request that succeeded.
type AdminResponse struct {
	OK bool `json:"ok"`
	// Result is what the request produced: for a transfer,
	// {"leader": id}; null for the others.
	Result any `json:"result"`
}

// RecoverResponse answers a forced recovery that started a new epoch.
type RecoverResponse struct {
	OK    bool   `json:"ok"`
	Epoch uint64 `json:"epoch"`
}

// Watch streams: GET /v1/watch/<key> answers 200 and then newline-
// delimited JSON, one WatchLine a line, until the client leaves, the
// process shuts down, or a compaction passes the stream (a last line with
// an error). A line never splits a revision: it holds every change the
// revision made to the watched keys, so that a client that resumes from
// the last revision it saw + 1 (?from=) neither misses nor repeats one.

// Event types of EventJSON.Type.
const (
	EventPut    = "put"
	EventDelete = "delete"
)

// EventJSON is one change to a watched key. KV is the key as the change
// left it; for a delete, its key and, as mod_index, the revision of the
// deletion, with no value and version 0 (etcd's tombstone). Prev, with
// ?prev_kv, is the key as the change found it: absent if it did not
// exist, or if the change is at the compaction revision and the state
// before it is compacted away.
type EventJSON struct {
	Type string  `json:"type"`
	KV   KVJSON  `json:"kv"`
	Prev *KVJSON `json:"prev,omitempty"`
}

// WatchLine is one line of a watch stream, one of three kinds:
//
//   - events: every change revision Revision made to the watched keys,
//     in the order the revision made them; lines of events come in
//     increasing revisions;
//   - progress (Progress true, no events): every change up to Revision
//     has been sent; the first line of a watch started without ?from is
//     one, at the revision the watch starts after, and idle streams get
//     one now and then. It promises only what the serving process has
//     applied;
//   - error (Error set): the last line. Revision is then the revision
//     every change up to which was sent (0: none was said).
type WatchLine struct {
	Revision uint64      `json:"revision"`
	Events   []EventJSON `json:"events,omitempty"`
	Progress bool        `json:"progress,omitempty"`
	Error    *ErrorJSON  `json:"error,omitempty"`
}

// MaxWatchLineBytes bounds a watch stream's line: one revision's changes
// of at most 128 operations (etcd's limit of operations in a transaction)
// of the largest request, with their previous values, JSON-encoded.
const MaxWatchLineBytes = 64 << 20

// WatchDecoder reads a watch stream's lines and checks them: each is one
// JSON object of one kind, every event's mod_index is its line's
// revision, events' revisions increase, a progress line never goes back,
// and nothing follows an error line.
type WatchDecoder struct {
	r     *bufio.Reader
	max   int
	last  uint64 // the revision of the last line with one
	ended bool
}

// NewWatchDecoder reads lines of up to maxLine bytes from r (0:
// MaxWatchLineBytes).
func NewWatchDecoder(r io.Reader, maxLine int) *WatchDecoder {
	if maxLine <= 0 {
		maxLine = MaxWatchLineBytes
	}
	return &WatchDecoder{r: bufio.NewReaderSize(r, 64<<10), max: maxLine}
}

// ErrWatchEnded is what Next returns after an error line.
var ErrWatchEnded = errors.New("kvjson: the watch stream ended with an error line")

// Next returns the next line: io.EOF at the end of the stream, and
// io.ErrUnexpectedEOF for a last line cut short (the connection broke;
// resume from the last revision seen + 1).
func (d *WatchDecoder) Next() (WatchLine, error) {
	if d.ended {
		return WatchLine{}, ErrWatchEnded
	}
	var line []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		if len(line)+len(chunk) > d.max {
			return WatchLine{}, fmt.Errorf("kvjson: a watch line over %d bytes", d.max)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return WatchLine{}, io.ErrUnexpectedEOF
		}
		return WatchLine{}, err
	}
	l, err := DecodeWatchLine(line)
	if err != nil {
		return WatchLine{}, err
	}
	switch {
	case l.Error != nil:
		d.ended = true
	case len(l.Events) > 0 && l.Revision <= d.last:
		return WatchLine{}, fmt.Errorf("kvjson: a watch line of events at revision %d after one at %d", l.Revision, d.last)
	case l.Progress && l.Revision < d.last:
		return WatchLine{}, fmt.Errorf("kvjson: a watch progress line at revision %d after one at %d", l.Revision, d.last)
	}
	if l.Error == nil {
		d.last = l.Revision
	}
	return l, nil
}

// DecodeWatchLine decodes one line of a watch stream (its newline
// included or not) and checks it alone: one JSON object, of one kind
// (events, progress or error); a line of events or progress at a positive
// revision; each event a put or a delete of a non-empty key at the line's
// revision, a put's create_index at or below it and its version at least
// 1, a delete's create_index and version 0.
func DecodeWatchLine(b []byte) (WatchLine, error) {
	var l WatchLine
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		return WatchLine{}, fmt.Errorf("kvjson: a watch line is not a JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return WatchLine{}, errors.New("kvjson: a watch line holds more than one JSON value")
	}
	kinds := 0
	for _, k := range []bool{len(l.Events) > 0, l.Progress, l.Error != nil} {
		if k {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return WatchLine{}, fmt.Errorf("kvjson: a watch line must be one of events, progress or error (it is %d of them)", kinds)
	case l.Error != nil:
		if l.Error.Code == "" {
			return WatchLine{}, errors.New("kvjson: a watch error line without a code")
		}
		return l, nil
	case l.Revision == 0:
		return WatchLine{}, errors.New("kvjson: a watch line of events or progress at revision 0")
	}
	for i, e := range l.Events {
		kv := e.KV
		var bad string
		switch {
		case kv.Key == "":
			bad = "an empty key"
		case kv.ModIndex != l.Revision:
			bad = fmt.Sprintf("mod_index %d", kv.ModIndex)
		case e.Type == EventPut && (kv.Version == 0 || kv.CreateIndex == 0 || kv.CreateIndex > kv.ModIndex):
			bad = fmt.Sprintf("a put of version %d created at %d", kv.Version, kv.CreateIndex)
		case e.Type == EventDelete && (kv.Version != 0 || kv.CreateIndex != 0 || kv.Value != nil || kv.ValueBase64 != ""):
			bad = "a delete with a value, version or create_index"
		case e.Type != EventPut && e.Type != EventDelete:
			bad = fmt.Sprintf("type %q", e.Type)
		}
		if bad != "" {
			return WatchLine{}, fmt.Errorf("kvjson: event %d of the watch line at revision %d has %s", i, l.Revision, bad)
		}
	}
	return l, nil
}
