package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// Response headers. Every KV response carries the log index it reflects
// and, when a value is involved, the edict stamp of that value.
const (
	HeaderIndex       = "X-Edictkv-Index"       // for a write its entry's index; for a read the applied index it reflects
	HeaderModIndex    = "X-Edictkv-Mod-Index"   // the index of the entry that last wrote the value
	HeaderStamp       = "X-Edictkv-Stamp"       // the value's edict stamp, as StampJSON.Token
	HeaderConsistency = "X-Edictkv-Consistency" // how a read was served: lease, follower or stale
	HeaderServedBy    = "X-Edictkv-Served-By"   // the process that served the request
	// HeaderPartition is "minority" on a stale read served in a minority
	// partition (a non-authoritative local leader, --detector fetzer).
	HeaderPartition   = "X-Edictkv-Partition"
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
	CodeNoLeader         = "no_leader"
	CodeNotLeader        = "not_leader"
	CodeOutcomeUnknown   = "outcome_unknown"
	CodeNotCommitted     = "not_committed"
	CodeMethod           = "method_not_allowed"
	CodeNoEndpoint       = "no_endpoint"
	CodeShuttingDown     = "shutting_down"
	CodeInternal         = "internal"
)

// ErrorJSON is the body of every error response.
type ErrorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Index is the applied index the answer reflects, where one is known
	// (a 404 or a 409).
	Index uint64 `json:"index,omitempty"`
	// Current is the key's state when a compare-and-swap failed (absent
	// if the key does not exist).
	Current *KVJSON `json:"current,omitempty"`
}

// apiError is an error answer on its way to the client.
type apiError struct {
	status int
	body   ErrorJSON
}

func errorf(status int, code, msg string) *apiError {
	return &apiError{status: status, body: ErrorJSON{Error: msg, Code: code}}
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

func stampJSON(s edict.Stamp) StampJSON {
	out := StampJSON{Epoch: s.Epoch, Counter: s.Counter, QT: make([]ReadingJSON, 0, len(s.QT))}
	for _, r := range s.QT {
		out.QT = append(out.QT, ReadingJSON{Process: uint64(r.Process), Incarnation: r.T.Incarnation, Nanos: r.T.Nanos})
	}
	out.Token = stampToken(s)
	return out
}

func stampToken(s edict.Stamp) string {
	b, err := edict.EncodeStamp(s)
	if err != nil {
		// Stamps come from the log, which validated them; an unencodable
		// one is reported as absent rather than failing the request.
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// KVJSON is a key's state. Value holds a UTF-8 value; any other value is in
// ValueBase64 instead (JSON strings cannot carry arbitrary bytes).
type KVJSON struct {
	Key         string    `json:"key"`
	Value       *string   `json:"value,omitempty"`
	ValueBase64 string    `json:"value_base64,omitempty"`
	CreateIndex uint64    `json:"create_index"`
	ModIndex    uint64    `json:"mod_index"`
	Version     uint64    `json:"version"`
	Stamp       StampJSON `json:"stamp"`
}

func kvJSON(kv kvfsm.KeyValue) *KVJSON {
	out := &KVJSON{Key: kv.Key, CreateIndex: kv.CreateRevision, ModIndex: kv.ModRevision,
		Version: kv.Version, Stamp: stampJSON(kv.Stamp)}
	if utf8.ValidString(kv.Value) {
		v := kv.Value
		out.Value = &v
	} else {
		out.ValueBase64 = base64.StdEncoding.EncodeToString([]byte(kv.Value))
	}
	return out
}

// GetResponse answers GET /v1/kv/<key>.
type GetResponse struct {
	KVJSON
	// Index is the applied index the answer reflects at least.
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
	// Index is the write's log index (the value's mod_index for a PUT).
	Index uint64 `json:"index"`
	// Stamp is the write's edict stamp: the value's stamp for a PUT.
	Stamp StampJSON `json:"stamp"`
	// Deleted counts the keys a DELETE removed.
	Deleted uint64 `json:"deleted,omitempty"`
	// Prev is the key's state before the write, if it existed.
	Prev *KVJSON `json:"prev,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.body.Index != 0 {
		w.Header().Set(HeaderIndex, strconv.FormatUint(e.body.Index, 10))
	}
	writeJSON(w, e.status, e.body)
}

// WriteJSON answers v as the API answers: indented JSON, with status. It
// is for the endpoints the process adds beside the API (Server.Handle).
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// WriteError answers an ErrorJSON with status, code and msg, as the API
// answers every error. It is for the endpoints the process adds beside the
// API (Server.Handle).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, errorf(status, code, msg))
}
