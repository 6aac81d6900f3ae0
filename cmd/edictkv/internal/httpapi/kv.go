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
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// The query parameters each method accepts; anything else is refused, so
// that a typo (?consistncy=stale) is not silently ignored.
var kvParams = map[string][]string{
	http.MethodGet:    {"consistency", "revision", "redirect"},
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
		writeError(w, errorf(http.StatusMethodNotAllowed, kvjson.CodeMethod, fmt.Sprintf("method %s not allowed on /v1/kv/<key>", r.Method)))
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
		return kvRequest{}, errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, fmt.Sprintf("key %q is not a valid URL path: %v", raw, err))
	}
	if aerr := s.checkKey(key); aerr != nil {
		return kvRequest{}, aerr
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return kvRequest{}, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("malformed query string: %v", err))
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return kvRequest{}, errorf(http.StatusBadRequest, kvjson.CodeUnknownParameter,
				fmt.Sprintf("unknown parameter %q for %s (allowed: %s)", name, r.Method, strings.Join(allowed, ", ")))
		}
		if len(vs) > 1 {
			return kvRequest{}, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("parameter %q given %d times", name, len(vs)))
		}
	}
	req := kvRequest{key: key, query: q}
	if q.Has("redirect") {
		switch v := q.Get("redirect"); v {
		case "", "1", "true":
			req.redirect = true
		case "0", "false":
		default:
			return kvRequest{}, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("redirect=%q: want true or false", v))
		}
	}
	return req, nil
}

// checkKey enforces the HTTP API's key policy, stricter than the KV
// service's: non-empty, within the limit, UTF-8, no control characters
// (keys travel in URL paths and headers).
func (s *Server) checkKey(key string) *apiError {
	limit := s.cfg.KV.Limits().MaxKeyBytes
	switch {
	case key == "":
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, "empty key: use /v1/kv/<key>")
	case len(key) > limit:
		return errorf(http.StatusRequestURITooLong, kvjson.CodeKeyTooLarge,
			fmt.Sprintf("key of %d bytes exceeds the limit of %d", len(key), limit))
	case !utf8.ValidString(key):
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, "key is not valid UTF-8")
	}
	for i, c := range key {
		if c < 0x20 || c == 0x7f {
			return errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, fmt.Sprintf("key contains control character U+%04X at byte %d", c, i))
		}
	}
	return nil
}

var levels = map[string]edictlog.ReadLevel{"lease": edictlog.ReadLease, "follower": edictlog.ReadFollower, "stale": edictlog.ReadStale}

// get reads a key at the level asked for. The default is follower:
// linearizable, answered by the process asked, at the leader as a lease
// read and elsewhere once it has applied the leader's commit index, as a
// linearizable read of etcd's API is. Only an explicit lease read goes to
// the leader.
func (s *Server) get(w http.ResponseWriter, r *http.Request, req kvRequest) {
	name := "follower"
	if req.query.Has("consistency") {
		name = req.query.Get("consistency")
	}
	level, ok := levels[name]
	if !ok {
		writeError(w, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("consistency=%q: want lease, follower or stale", name)))
		return
	}
	rr := &pb.RangeRequest{Key: []byte(req.key)}
	if req.query.Has("revision") {
		rev, err := strconv.ParseInt(req.query.Get("revision"), 10, 64)
		if err != nil || rev <= 0 {
			writeError(w, errorf(http.StatusBadRequest, kvjson.CodeBadParameter,
				fmt.Sprintf("revision=%q: want a positive log index", req.query.Get("revision"))))
			return
		}
		rr.Revision = rev
	}
	s.metrics.reads.WithLabelValues(name).Inc()
	read := func(ctx context.Context) error {
		resp, info, err := s.cfg.KV.Range(ctx, level, rr)
		var nle *edictlog.NotLeaderError
		switch {
		case errors.As(err, &nle):
			return err // route again
		case errors.Is(err, context.Canceled):
			return nil // the client left
		case err != nil:
			writeError(w, s.errorOf("read", err))
			return nil
		}
		s.answerRead(w, req.key, resp, info)
		return nil
	}
	if level == edictlog.ReadLease {
		s.atLeader(w, r, nil, req.redirect, false, read)
		return
	}
	// Follower and stale reads are served here; only a follower read with
	// no leader known has to wait for one, up to the router's wait.
	var nle *edictlog.NotLeaderError
	if err := s.cfg.Router.Retry(r.Context(), read); errors.As(err, &nle) && r.Context().Err() == nil {
		s.noLeader(w, edict.None)
	}
}

func (s *Server) answerRead(w http.ResponseWriter, key string, resp *pb.RangeResponse, info kvservice.Info) {
	served := info.Level.String()
	index := uint64(resp.Header.Revision)
	w.Header().Set(kvjson.HeaderConsistency, served)
	w.Header().Set(kvjson.HeaderServedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
	if len(resp.Kvs) == 0 {
		e := errorf(http.StatusNotFound, kvjson.CodeNotFound, fmt.Sprintf("key %q not found", key))
		e.body.Index = index
		writeError(w, e)
		return
	}
	kv := resp.Kvs[0]
	out := kvjson.GetResponse{KVJSON: *kvJSON(kv, info), Index: index, Consistency: served}
	if info.Level == edictlog.ReadStale {
		ms := info.Staleness.Milliseconds()
		if info.Staleness < 0 {
			ms = -1
		}
		out.StalenessMS = &ms
		if s.cfg.LocalLeader != nil {
			if ll, ok := s.cfg.LocalLeader(); ok {
				out.LocalLeader = ll
				if !ll.Authoritative {
					w.Header().Set(kvjson.HeaderPartition, "minority")
				}
			}
		}
	}
	w.Header().Set(kvjson.HeaderIndex, strconv.FormatUint(index, 10))
	w.Header().Set(kvjson.HeaderModIndex, strconv.FormatUint(uint64(kv.ModRevision), 10))
	w.Header().Set(kvjson.HeaderStamp, out.Stamp.Token)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, req kvRequest) {
	limit := s.cfg.KV.Limits().MaxValueBytes
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, errorf(http.StatusRequestEntityTooLarge, kvjson.CodeValueTooLarge,
				fmt.Sprintf("value exceeds the limit of %d bytes", limit)))
			return
		}
		writeError(w, errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, fmt.Sprintf("reading the value: %v", err)))
		return
	}
	key := []byte(req.key)
	var cmp *pb.Compare
	switch {
	case req.query.Has("cas") && req.query.Has("prev"):
		writeError(w, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, "cas and prev are exclusive: compare by index or by value, not both"))
		return
	case req.query.Has("cas"):
		idx, err := strconv.ParseInt(req.query.Get("cas"), 10, 64)
		if err != nil || idx < 0 {
			writeError(w, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("cas=%q: want a log index (0 = create only)", req.query.Get("cas"))))
			return
		}
		cmp = &pb.Compare{Key: key, Result: pb.Compare_EQUAL, Target: pb.Compare_MOD, TargetUnion: &pb.Compare_ModRevision{ModRevision: idx}}
		if idx == 0 {
			// Create only: the key must not exist.
			cmp = &pb.Compare{Key: key, Result: pb.Compare_EQUAL, Target: pb.Compare_CREATE, TargetUnion: &pb.Compare_CreateRevision{}}
		}
	case req.query.Has("prev"):
		cmp = &pb.Compare{Key: key, Result: pb.Compare_EQUAL, Target: pb.Compare_VALUE,
			TargetUnion: &pb.Compare_Value{Value: []byte(req.query.Get("prev"))}}
	}
	s.atLeader(w, r, body, req.redirect, true, func(ctx context.Context) error {
		if cmp == nil {
			resp, info, err := s.cfg.KV.Put(ctx, &pb.PutRequest{Key: key, Value: body, PrevKv: true})
			if err != nil {
				return s.writeFailed(w, err)
			}
			out := s.written(w, req.key, resp.Header, info)
			if resp.PrevKv != nil {
				out.Prev = kvJSON(resp.PrevKv, info)
			}
			w.Header().Set(kvjson.HeaderModIndex, strconv.FormatUint(out.Index, 10))
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		// A compare-and-swap reads the key when the compare fails, so that
		// the answer says what it holds without another round trip.
		resp, info, err := s.cfg.KV.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmp},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: body}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key}}}}})
		if err != nil {
			return s.writeFailed(w, err)
		}
		out := s.written(w, req.key, resp.Header, info)
		if !resp.Succeeded {
			e := errorf(http.StatusConflict, kvjson.CodeCASFailed, fmt.Sprintf("compare failed: key %q was not in the expected state", req.key))
			e.body.Index = out.Index
			if rs := resp.Responses; len(rs) == 1 && rs[0].GetResponseRange() != nil && len(rs[0].GetResponseRange().Kvs) == 1 {
				e.body.Current = kvJSON(rs[0].GetResponseRange().Kvs[0], info)
				w.Header().Set(kvjson.HeaderModIndex, strconv.FormatUint(e.body.Current.ModIndex, 10))
			}
			w.Header().Del(kvjson.HeaderStamp)
			writeError(w, e)
			return nil
		}
		w.Header().Set(kvjson.HeaderModIndex, strconv.FormatUint(out.Index, 10))
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (s *Server) del(w http.ResponseWriter, r *http.Request, req kvRequest) {
	s.atLeader(w, r, nil, req.redirect, true, func(ctx context.Context) error {
		resp, info, err := s.cfg.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(req.key), PrevKv: true})
		if err != nil {
			return s.writeFailed(w, err)
		}
		out := s.written(w, req.key, resp.Header, info)
		if resp.Deleted == 0 {
			e := errorf(http.StatusNotFound, kvjson.CodeNotFound, fmt.Sprintf("key %q not found", req.key))
			e.body.Index = out.Index
			w.Header().Del(kvjson.HeaderStamp)
			writeError(w, e)
			return nil
		}
		out.Deleted = uint64(resp.Deleted)
		if len(resp.PrevKvs) > 0 {
			out.Prev = kvJSON(resp.PrevKvs[0], info)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// written sets the headers every committed write's answer carries and
// returns the answer's body: the write's index and stamp.
func (s *Server) written(w http.ResponseWriter, key string, h *pb.ResponseHeader, info kvservice.Info) kvjson.WriteResponse {
	out := kvjson.WriteResponse{Key: key, Index: uint64(h.Revision), Stamp: stampJSON(info.Stamp(h.Revision))}
	w.Header().Set(kvjson.HeaderServedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
	w.Header().Set(kvjson.HeaderIndex, strconv.FormatUint(out.Index, 10))
	w.Header().Set(kvjson.HeaderStamp, out.Stamp.Token)
	return out
}

// writeFailed answers a write the service did not do, or returns the
// refusal that sends it to the leader.
func (s *Server) writeFailed(w http.ResponseWriter, err error) error {
	var nle *edictlog.NotLeaderError
	if errors.As(err, &nle) {
		// Refused, not appended (no longer the leader, a transfer, an
		// ending epoch): look for the leader again.
		return err
	}
	writeError(w, s.errorOf("write", err))
	return nil
}
