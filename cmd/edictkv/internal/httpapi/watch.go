package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// Watchable is the process's applied state as a watch reads it
// (*kvstate.State): its store, whose watchers send the changes, and the
// edict stamps of the revisions they name.
type Watchable interface {
	Store() *mvcc.Store
	Stamps(revs []int64) (map[int64]edict.Stamp, error)
}

// DefaultWatchProgress is how long a watch stream may go without a line
// before it is sent a progress line: shorter than the idle timeouts of
// the proxies between a client and the server.
const DefaultWatchProgress = 10 * time.Second

// watchParams are the query parameters GET /v1/watch/<key> takes.
var watchParams = []string{"prefix", "from", "prev_kv"}

// watchRequest is a /v1/watch request, parsed and checked.
type watchRequest struct {
	key, end []byte
	// from is the first revision to send; 0: after the current one.
	from   int64
	prevKV bool
}

// handleWatch streams the changes to a key, or to the keys under a
// prefix, from the process's own applied state: nothing is forwarded,
// and every process answers alike. See kvjson.WatchLine for the lines.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	req, aerr := s.parseWatch(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if s.draining.Load() {
		writeError(w, errorf(http.StatusServiceUnavailable, kvjson.CodeShuttingDown, fmt.Sprintf("process %d is shutting down: watch through another", s.cfg.ID)))
		return
	}
	st := s.cfg.Watch.Store()
	ws := st.NewWatchStream()
	defer ws.Close()
	// Rev is the revision every change up to which a watcher added now
	// needs not be sent: starting after it misses nothing and tells the
	// client where the stream starts.
	start, rev := req.from, ws.Rev()
	if start == 0 {
		start = rev + 1
	}
	if cr := st.CompactRev(); start < cr {
		e := errorf(http.StatusGone, kvjson.CodeCompacted,
			fmt.Sprintf("watch from revision %d: compacted; the oldest revision kept is %d", start, cr))
		e.body.Index, e.body.CompactRevision = uint64(rev), uint64(cr)
		writeError(w, e)
		return
	}
	var opts []mvcc.WatchOption
	if req.prevKV {
		opts = append(opts, mvcc.WatchPrevKV)
	}
	id, err := ws.Watch(mvcc.AutoWatchID, req.key, req.end, start, opts...)
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, kvjson.CodeInternal, fmt.Sprintf("watch: %v", err)))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set(kvjson.HeaderIndex, strconv.FormatInt(rev, 10))
	h.Set(kvjson.HeaderServedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	s.metrics.watches.Inc()
	defer s.metrics.watches.Dec()
	sw := &watchWriter{w: w, rc: http.NewResponseController(w), stamps: s.cfg.Watch.Stamps, sent: start - 1}
	if req.from == 0 {
		sw.line(kvjson.WatchLine{Revision: uint64(rev), Progress: true})
	}
	if err := sw.flush(); err != nil {
		return
	}
	s.streamWatch(r.Context(), ws, id, sw)
}

// streamWatch writes the stream's responses as lines until the client
// leaves, the server drains, or the watcher is cancelled.
func (s *Server) streamWatch(ctx context.Context, ws *mvcc.WatchStream, id mvcc.WatchID, sw *watchWriter) {
	tick := time.NewTicker(s.cfg.WatchProgress)
	defer tick.Stop()
	wrote := false // a line of events since the last tick
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.drained:
			sw.end(kvjson.CodeShuttingDown, fmt.Sprintf("process %d is shutting down: watch again through another from revision %d", s.cfg.ID, sw.sent+1))
			return
		case <-tick.C:
			if !wrote {
				// Not sent while the watcher catches up, or its channel
				// is full: the next tick asks again.
				ws.RequestProgress(id)
			}
			wrote = false
			continue
		case resp, ok := <-ws.Chan():
			if !ok {
				sw.end(kvjson.CodeShuttingDown, fmt.Sprintf("process %d closed its state: watch again from revision %d", s.cfg.ID, sw.sent+1))
				return
			}
			if err := sw.response(resp); err != nil {
				if !errors.Is(err, errWatchWrite) {
					s.log.Error("watch", "err", err)
					sw.end(kvjson.CodeInternal, err.Error())
				}
				return
			}
			if resp.CompactRevision != 0 {
				return
			}
			// A progress line does not count: an idle stream gets one
			// every interval.
			wrote = wrote || len(resp.Events) > 0
			if len(ws.Chan()) > 0 {
				continue // flush once the channel is empty
			}
		}
		if sw.flush() != nil {
			return
		}
	}
}

// errWatchWrite is a write to the client that failed: it left.
var errWatchWrite = errors.New("httpapi: watch: write to the client failed")

// watchWriter writes a watch stream's lines.
type watchWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	stamps func([]int64) (map[int64]edict.Stamp, error)
	// sent is the revision every change up to which has been written.
	sent int64
	err  error
}

// response writes one response of the store's watcher: its events a line
// per revision, a progress line, or a compaction's last line.
func (sw *watchWriter) response(resp mvcc.WatchResponse) error {
	switch {
	case resp.CompactRevision != 0:
		e := kvjson.ErrorJSON{Code: kvjson.CodeCompacted, CompactRevision: uint64(resp.CompactRevision),
			Error: fmt.Sprintf("revision %d, the next this watch was to be sent, is compacted; the oldest revision kept is %d", sw.sent+1, resp.CompactRevision)}
		sw.line(kvjson.WatchLine{Revision: uint64(sw.sent), Error: &e})
		return sw.flush()
	case len(resp.Events) == 0:
		// A progress at the revision already said still tells an idle
		// client, and the proxies on the way, that the stream lives.
		if resp.Revision >= sw.sent && resp.Revision > 0 {
			sw.sent = resp.Revision
			sw.line(kvjson.WatchLine{Revision: uint64(resp.Revision), Progress: true})
		}
		return sw.err
	}
	revs := make([]int64, 0, 2*len(resp.Events))
	for _, e := range resp.Events {
		revs = append(revs, e.Kv.ModRevision)
		if e.PrevKv != nil {
			revs = append(revs, e.PrevKv.ModRevision)
		}
	}
	stamps, err := sw.stamps(revs)
	if err != nil {
		return fmt.Errorf("watch: the stamps of revisions %d to %d: %w", resp.Events[0].Kv.ModRevision, resp.Revision, err)
	}
	info := kvservice.Info{Stamps: stamps}
	for evs := resp.Events; len(evs) > 0; {
		rev := evs[0].Kv.ModRevision
		n := 1
		for n < len(evs) && evs[n].Kv.ModRevision == rev {
			n++
		}
		l := kvjson.WatchLine{Revision: uint64(rev), Events: make([]kvjson.EventJSON, 0, n)}
		for _, e := range evs[:n] {
			l.Events = append(l.Events, eventJSON(e, info))
		}
		sw.line(l)
		sw.sent = rev
		evs = evs[n:]
	}
	return sw.err
}

func eventJSON(e mvccpb.Event, info kvservice.Info) kvjson.EventJSON {
	out := kvjson.EventJSON{Type: kvjson.EventPut, KV: *kvJSON(e.Kv, info)}
	if e.Type == mvccpb.DELETE {
		out.Type = kvjson.EventDelete
		out.KV.Value, out.KV.ValueBase64 = nil, ""
	}
	if e.PrevKv != nil {
		out.Prev = kvJSON(e.PrevKv, info)
	}
	return out
}

// line writes one line; the first failure sticks.
func (sw *watchWriter) line(l kvjson.WatchLine) {
	if sw.err != nil {
		return
	}
	b, err := json.Marshal(l)
	if err != nil {
		sw.err = fmt.Errorf("watch: encoding a line: %w", err)
		return
	}
	if _, err := sw.w.Write(append(b, '\n')); err != nil {
		sw.err = errWatchWrite
	}
}

func (sw *watchWriter) flush() error {
	if sw.err == nil && sw.rc.Flush() != nil {
		sw.err = errWatchWrite
	}
	return sw.err
}

// end writes a last error line.
func (sw *watchWriter) end(code, msg string) {
	sw.line(kvjson.WatchLine{Revision: uint64(sw.sent), Error: &kvjson.ErrorJSON{Code: code, Error: msg}})
	_ = sw.flush()
}

// parseWatch checks a watch request before anything is watched.
func (s *Server) parseWatch(r *http.Request) (watchRequest, *apiError) {
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/watch/")
	key, err := url.PathUnescape(raw)
	if err != nil {
		return watchRequest{}, errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, fmt.Sprintf("key %q is not a valid URL path: %v", raw, err))
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return watchRequest{}, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("malformed query string: %v", err))
	}
	for name, vs := range q {
		if !slices.Contains(watchParams, name) {
			return watchRequest{}, errorf(http.StatusBadRequest, kvjson.CodeUnknownParameter,
				fmt.Sprintf("unknown parameter %q for a watch (allowed: %s)", name, strings.Join(watchParams, ", ")))
		}
		if len(vs) > 1 {
			return watchRequest{}, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("parameter %q given %d times", name, len(vs)))
		}
	}
	var req watchRequest
	prefix, aerr := boolParam(q, "prefix")
	if aerr != nil {
		return req, aerr
	}
	if req.prevKV, aerr = boolParam(q, "prev_kv"); aerr != nil {
		return req, aerr
	}
	if q.Has("from") {
		from, err := strconv.ParseInt(q.Get("from"), 10, 64)
		if err != nil || from <= 0 {
			return req, errorf(http.StatusBadRequest, kvjson.CodeBadParameter,
				fmt.Sprintf("from=%q: want a positive revision (the last one seen + 1 to resume)", q.Get("from")))
		}
		req.from = from
	}
	switch {
	case key == "" && prefix:
		// Every key.
		req.key, req.end = []byte{0}, []byte{0}
	default:
		if aerr := s.checkKey(key); aerr != nil {
			if key == "" {
				aerr.body.Error = "empty key: use /v1/watch/<key>, or /v1/watch/?prefix for every key"
			}
			return req, aerr
		}
		req.key = []byte(key)
		if prefix {
			req.end = prefixEnd(req.key)
		}
	}
	return req, nil
}

// boolParam reads a flag parameter: present and empty, 1 or true; 0 or
// false; absent is false.
func boolParam(q url.Values, name string) (bool, *apiError) {
	if !q.Has(name) {
		return false, nil
	}
	switch v := q.Get(name); v {
	case "", "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	default:
		return false, errorf(http.StatusBadRequest, kvjson.CodeBadParameter, fmt.Sprintf("%s=%q: want true or false", name, v))
	}
}

// prefixEnd is the end of the range of keys that start with prefix, as
// etcd's clientv3.GetPrefixRangeEnd: the prefix with its last byte below
// 0xff incremented and what follows dropped; "\x00" (every key from
// prefix on) if every byte is 0xff.
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}
