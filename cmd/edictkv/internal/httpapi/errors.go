package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// apiError is an error answer on its way to the client.
type apiError struct {
	status int
	body   kvjson.ErrorJSON
}

func errorf(status int, code, msg string) *apiError {
	return &apiError{status: status, body: kvjson.ErrorJSON{Error: msg, Code: code}}
}

// errorOf turns an error of the KV service (or of the log beneath it) into
// the answer: the HTTP API's one mapping of kvservice's errors. A write
// whose outcome is unknown is never reported as a failure. what names the
// request in the message.
func (s *Server) errorOf(what string, err error) *apiError {
	var re *kvservice.RevisionError
	if errors.As(err, &re) {
		e := errorf(http.StatusBadRequest, kvjson.CodeFutureRevision, fmt.Sprintf("%s: %v", what, err))
		if errors.Is(err, kvservice.ErrCompacted) {
			e = errorf(http.StatusGone, kvjson.CodeCompacted, fmt.Sprintf("%s: %v", what, err))
		}
		e.body.Index = uint64(re.Current)
		return e
	}
	switch {
	case errors.Is(err, kvservice.ErrTimeout):
		return errorf(http.StatusGatewayTimeout, kvjson.CodeOutcomeUnknown,
			fmt.Sprintf("%s: the outcome is unknown (it may still commit); read the key to find out: %v", what, err))
	case errors.Is(err, kvservice.ErrLeaderChanged):
		return errorf(http.StatusServiceUnavailable, kvjson.CodeNotCommitted,
			fmt.Sprintf("%s: not committed: the leader lost its lease and a new reign's edict took the write's place; it had no effect, retry it", what))
	case errors.Is(err, kvservice.ErrNoLeader):
		return errorf(http.StatusServiceUnavailable, kvjson.CodeNoLeader, fmt.Sprintf("%s: %v; retry", what, err))
	case errors.Is(err, kvservice.ErrStopped):
		return errorf(http.StatusServiceUnavailable, kvjson.CodeShuttingDown, fmt.Sprintf("%s: process %d is shutting down", what, s.cfg.ID))
	case errors.Is(err, kvservice.ErrKeyTooLarge):
		return errorf(http.StatusRequestURITooLong, kvjson.CodeKeyTooLarge, err.Error())
	case errors.Is(err, kvservice.ErrValueTooLarge), errors.Is(err, kvservice.ErrRequestTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, kvjson.CodeValueTooLarge, err.Error())
	case errors.Is(err, kvservice.ErrEmptyKey):
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, err.Error())
	case errors.Is(err, kvservice.ErrInvalid), errors.Is(err, kvservice.ErrDuplicateKey),
		errors.Is(err, kvservice.ErrTooManyOps), errors.Is(err, kvservice.ErrUnsupported):
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, err.Error())
	case errors.Is(err, kvservice.ErrKeyNotFound):
		return errorf(http.StatusNotFound, kvjson.CodeNotFound, err.Error())
	case errors.Is(err, kvservice.ErrNoSpace):
		return errorf(http.StatusInsufficientStorage, kvjson.CodeNoSpace, fmt.Sprintf("%s: %v", what, err))
	case errors.Is(err, kvservice.ErrCorrupt):
		return errorf(http.StatusInternalServerError, kvjson.CodeCorrupt,
			fmt.Sprintf("%s: %v: the CORRUPT alarm is active; every KV request is refused until it is deactivated", what, err))
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusGatewayTimeout, kvjson.CodeOutcomeUnknown, fmt.Sprintf("%s: timed out: %v", what, err))
	}
	s.log.Error("request failed", "what", what, "err", err)
	return errorf(http.StatusInternalServerError, kvjson.CodeInternal, fmt.Sprintf("%s: %v", what, err))
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
		w.Header().Set(kvjson.HeaderIndex, strconv.FormatUint(e.body.Index, 10))
	}
	writeJSON(w, e.status, e.body)
}

// WriteJSON answers v as the API answers: indented JSON, with status. It
// is for the endpoints the process adds beside the API (Server.Handle).
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// WriteError answers a kvjson.ErrorJSON with status, code and msg, as the
// API answers every error. It is for the endpoints the process adds
// beside the API (Server.Handle).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, errorf(status, code, msg))
}

func stampJSON(s edict.Stamp) kvjson.StampJSON {
	out := kvjson.StampJSON{Epoch: s.Epoch, Counter: s.Counter, QT: make([]kvjson.ReadingJSON, 0, len(s.QT))}
	for _, r := range s.QT {
		out.QT = append(out.QT, kvjson.ReadingJSON{Process: uint64(r.Process), Incarnation: r.T.Incarnation, Nanos: r.T.Nanos})
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

// kvJSON is a key's state as the API shows it, with the stamp of the
// entry that wrote it.
func kvJSON(kv *mvccpb.KeyValue, info kvservice.Info) *kvjson.KVJSON {
	out := &kvjson.KVJSON{Key: string(kv.Key), CreateIndex: uint64(kv.CreateRevision), ModIndex: uint64(kv.ModRevision),
		Version: uint64(kv.Version), Stamp: stampJSON(info.Stamp(kv.ModRevision))}
	if utf8.Valid(kv.Value) {
		v := string(kv.Value)
		out.Value = &v
	} else {
		out.ValueBase64 = base64.StdEncoding.EncodeToString(kv.Value)
	}
	return out
}
