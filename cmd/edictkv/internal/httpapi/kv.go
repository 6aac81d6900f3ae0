package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// The query parameters each method accepts; anything else is refused, so
// that a typo (?consistncy=stale) is not silently ignored.
var kvParams = map[string][]string{
	http.MethodGet:    {"consistency", "redirect"},
	http.MethodPut:    {"cas", "prev", "redirect"},
	http.MethodDelete: {"redirect"},
}

// kvRequest is a /v1/kv request, parsed and checked before anything
// touches the log.
type kvRequest struct {
	key      string
	query    url.Values
	redirect bool
}

func (s *Server) handleKV(w http.ResponseWriter, r *http.Request) {
	allowed, ok := kvParams[r.Method]
	if !ok {
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, fmt.Sprintf("method %s not allowed on /v1/kv/<key>", r.Method)))
		return
	}
	req, aerr := s.parseKV(r, allowed)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, r, req)
	case http.MethodPut:
		s.put(w, r, req)
	case http.MethodDelete:
		s.del(w, r, req)
	}
}

func (s *Server) parseKV(r *http.Request, allowed []string) (kvRequest, *apiError) {
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/kv/")
	key, err := url.PathUnescape(raw)
	if err != nil {
		return kvRequest{}, errorf(http.StatusBadRequest, CodeInvalidKey, fmt.Sprintf("key %q is not a valid URL path: %v", raw, err))
	}
	if aerr := s.checkKey(key); aerr != nil {
		return kvRequest{}, aerr
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return kvRequest{}, errorf(http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("malformed query string: %v", err))
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return kvRequest{}, errorf(http.StatusBadRequest, CodeUnknownParameter,
				fmt.Sprintf("unknown parameter %q for %s (allowed: %s)", name, r.Method, strings.Join(allowed, ", ")))
		}
		if len(vs) > 1 {
			return kvRequest{}, errorf(http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("parameter %q given %d times", name, len(vs)))
		}
	}
	req := kvRequest{key: key, query: q}
	if q.Has("redirect") {
		switch v := q.Get("redirect"); v {
		case "", "1", "true":
			req.redirect = true
		case "0", "false":
		default:
			return kvRequest{}, errorf(http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("redirect=%q: want true or false", v))
		}
	}
	return req, nil
}

// checkKey enforces the key policy: non-empty, within the limit, UTF-8,
// no control characters (which also keeps the registry's NUL-prefixed keys
// out of reach).
func (s *Server) checkKey(key string) *apiError {
	switch {
	case key == "":
		return errorf(http.StatusBadRequest, CodeInvalidKey, "empty key: use /v1/kv/<key>")
	case len(key) > s.cfg.Limits.MaxKeyBytes:
		return errorf(http.StatusRequestURITooLong, CodeKeyTooLarge,
			fmt.Sprintf("key of %d bytes exceeds the limit of %d", len(key), s.cfg.Limits.MaxKeyBytes))
	case !utf8.ValidString(key):
		return errorf(http.StatusBadRequest, CodeInvalidKey, "key is not valid UTF-8")
	}
	for i, c := range key {
		if c < 0x20 || c == 0x7f {
			return errorf(http.StatusBadRequest, CodeInvalidKey, fmt.Sprintf("key contains control character U+%04X at byte %d", c, i))
		}
	}
	return nil
}

var levels = map[string]log.ReadLevel{"lease": log.ReadLease, "follower": log.ReadFollower, "stale": log.ReadStale}

func (s *Server) get(w http.ResponseWriter, r *http.Request, req kvRequest) {
	name := "lease"
	if req.query.Has("consistency") {
		name = req.query.Get("consistency")
	}
	level, ok := levels[name]
	if !ok {
		writeError(w, errorf(http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("consistency=%q: want lease, follower or stale", name)))
		return
	}
	q, err := kvfsm.EncodeQuery(kvfsm.Range{Key: req.key})
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidKey, err.Error()))
		return
	}
	s.metrics.reads.WithLabelValues(name).Inc()
	read := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		defer cancel()
		res, err := s.cfg.Node.Read(ctx, level, q)
		if err != nil {
			var nle *log.NotLeaderError
			if !errors.As(err, &nle) {
				writeError(w, s.failure("read", err))
			}
			return err
		}
		s.answerRead(w, req.key, name, res)
		return nil
	}
	if level == log.ReadLease {
		s.atLeader(w, r, nil, req.redirect, read)
		return
	}
	// Follower and stale reads are served here; only a follower read with
	// no leader known has to wait for one, up to LeaderWait.
	var nle *log.NotLeaderError
	if err := s.router.Retry(r.Context(), read); errors.As(err, &nle) && r.Context().Err() == nil {
		s.noLeader(w, edict.None)
	}
}

func (s *Server) answerRead(w http.ResponseWriter, key, requested string, res log.ReadResult) {
	out, err := kvfsm.DecodeResult(res.Data)
	if err != nil || out.Range == nil {
		writeError(w, s.failure("decode read", fmt.Errorf("bad query result: %v", err)))
		return
	}
	served := res.Level.String()
	w.Header().Set(HeaderConsistency, served)
	w.Header().Set(HeaderServedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
	if len(out.Range.KVs) == 0 {
		e := errorf(http.StatusNotFound, CodeNotFound, fmt.Sprintf("key %q not found", key))
		e.body.Index = res.Index
		writeError(w, e)
		return
	}
	kv := out.Range.KVs[0]
	resp := GetResponse{KVJSON: *kvJSON(kv), Index: res.Index, Consistency: served}
	if res.Level == log.ReadStale {
		ms := res.Staleness.Milliseconds()
		if res.Staleness < 0 {
			ms = -1
		}
		resp.StalenessMS = &ms
		if s.cfg.LocalLeader != nil {
			if ll, ok := s.cfg.LocalLeader(); ok {
				resp.LocalLeader = ll
				if !ll.Authoritative {
					w.Header().Set(HeaderPartition, "minority")
				}
			}
		}
	}
	setValueHeaders(w, res.Index, kv)
	writeJSON(w, http.StatusOK, resp)
}

func setValueHeaders(w http.ResponseWriter, index uint64, kv kvfsm.KeyValue) {
	w.Header().Set(HeaderIndex, strconv.FormatUint(index, 10))
	w.Header().Set(HeaderModIndex, strconv.FormatUint(kv.ModRevision, 10))
	w.Header().Set(HeaderStamp, stampToken(kv.Stamp))
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, req kvRequest) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.Limits.MaxValueBytes)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, errorf(http.StatusRequestEntityTooLarge, CodeValueTooLarge,
				fmt.Sprintf("value exceeds the limit of %d bytes", s.cfg.Limits.MaxValueBytes)))
			return
		}
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("reading the value: %v", err)))
		return
	}
	value := string(body)
	cmd := kvfsm.Command{Put: &kvfsm.Put{Key: req.key, Value: value, PrevKV: true}}
	switch {
	case req.query.Has("cas") && req.query.Has("prev"):
		writeError(w, errorf(http.StatusBadRequest, CodeBadParameter, "cas and prev are exclusive: compare by index or by value, not both"))
		return
	case req.query.Has("cas"):
		idx, err := strconv.ParseUint(req.query.Get("cas"), 10, 64)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("cas=%q: want a log index (0 = create only)", req.query.Get("cas"))))
			return
		}
		cmd = kvfsm.CASIndex(req.key, idx, value)
	case req.query.Has("prev"):
		cmd = kvfsm.CASValue(req.key, req.query.Get("prev"), value)
	}
	s.write(w, r, req, body, cmd)
}

func (s *Server) del(w http.ResponseWriter, r *http.Request, req kvRequest) {
	s.write(w, r, req, nil, kvfsm.Command{Delete: &kvfsm.Delete{Key: req.key, PrevKV: true}})
}

// write commits cmd through the leader and answers with its outcome.
func (s *Server) write(w http.ResponseWriter, r *http.Request, req kvRequest, body []byte, cmd kvfsm.Command) {
	data, err := kvfsm.EncodeCommand(cmd)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, err.Error()))
		return
	}
	s.atLeader(w, r, body, req.redirect, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		defer cancel()
		start := time.Now()
		res, err := s.cfg.Node.Apply(ctx, data)
		if err != nil {
			var nle *log.NotLeaderError
			if errors.As(err, &nle) {
				// Refused, not appended (no longer the leader, a transfer,
				// an ending epoch): look for the leader again.
				return err
			}
			writeError(w, s.failure("write", err))
			return err
		}
		s.metrics.writeSeconds.Observe(time.Since(start).Seconds())
		s.answerWrite(w, req.key, res)
		return nil
	})
}

func (s *Server) answerWrite(w http.ResponseWriter, key string, res log.ApplyResult) {
	w.Header().Set(HeaderServedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
	w.Header().Set(HeaderIndex, strconv.FormatUint(res.Index, 10))
	switch out := res.Response.(type) {
	case error:
		// The state machine refused the command: nothing changed.
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, out.Error()))
	case *kvfsm.Result:
		s.answerResult(w, key, res, out)
	default:
		writeError(w, s.failure("write", fmt.Errorf("unexpected state machine response %T", res.Response)))
	}
}

func (s *Server) answerResult(w http.ResponseWriter, key string, res log.ApplyResult, out *kvfsm.Result) {
	resp := WriteResponse{Key: key, Index: res.Index, Stamp: stampJSON(res.Stamp)}
	switch {
	case out.Put != nil:
		if out.Put.PrevKV != nil {
			resp.Prev = kvJSON(*out.Put.PrevKV)
		}
	case out.Delete != nil:
		if out.Delete.Deleted == 0 {
			e := errorf(http.StatusNotFound, CodeNotFound, fmt.Sprintf("key %q not found", key))
			e.body.Index = res.Index
			writeError(w, e)
			return
		}
		resp.Deleted = out.Delete.Deleted
		if len(out.Delete.PrevKVs) > 0 {
			resp.Prev = kvJSON(out.Delete.PrevKVs[0])
		}
	case out.Txn != nil && !out.Txn.Succeeded:
		e := errorf(http.StatusConflict, CodeCASFailed, fmt.Sprintf("compare failed: key %q was not in the expected state", key))
		e.body.Index = res.Index
		if rs := out.Txn.Responses; len(rs) == 1 && rs[0].Range != nil && len(rs[0].Range.KVs) == 1 {
			e.body.Current = kvJSON(rs[0].Range.KVs[0])
			w.Header().Set(HeaderModIndex, strconv.FormatUint(e.body.Current.ModIndex, 10))
		}
		writeError(w, e)
		return
	}
	w.Header().Set(HeaderStamp, resp.Stamp.Token)
	if out.Put != nil || out.Txn != nil {
		w.Header().Set(HeaderModIndex, strconv.FormatUint(res.Index, 10))
	}
	writeJSON(w, http.StatusOK, resp)
}

// failure turns an error from the Node into an answer. A write whose
// outcome is unknown is never reported as a failure.
func (s *Server) failure(what string, err error) *apiError {
	switch {
	case errors.Is(err, log.ErrOutcomeUnknown):
		return errorf(http.StatusGatewayTimeout, CodeOutcomeUnknown,
			fmt.Sprintf("%s: the outcome is unknown (it may still commit); read the key to find out: %v", what, err))
	case errors.Is(err, log.ErrNotCommitted):
		return errorf(http.StatusServiceUnavailable, CodeNotCommitted,
			fmt.Sprintf("%s: not committed: the leader lost its lease and a new reign's edict took the write's place; it had no effect, retry it", what))
	case errors.Is(err, log.ErrShutdown):
		return errorf(http.StatusServiceUnavailable, CodeShuttingDown, fmt.Sprintf("%s: process %d is shutting down", what, s.cfg.ID))
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusGatewayTimeout, CodeOutcomeUnknown, fmt.Sprintf("%s: timed out: %v", what, err))
	case errors.Is(err, kvfsm.ErrInvalid):
		return errorf(http.StatusBadRequest, CodeInvalidRequest, err.Error())
	}
	s.log.Error("request failed", "what", what, "err", err)
	return errorf(http.StatusInternalServerError, CodeInternal, fmt.Sprintf("%s: %v", what, err))
}
