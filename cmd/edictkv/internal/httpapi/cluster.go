package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// status is this process's own view; Ready is what /readyz answers (see
// ready), with a shorter wait for the read barrier.
func (s *Server) status(ctx context.Context) kvjson.StatusJSON {
	st := s.cfg.Node.Status()
	out := kvjson.StatusJSON{ID: uint64(s.cfg.ID), Epoch: st.Epoch, Leader: uint64(st.Leader), IsLeader: st.IsLeader,
		Commit: st.Commit, Applied: st.Applied, FirstIndex: st.FirstIndex, LastIndex: st.LastIndex,
		Members: ids(st.Members), Learners: ids(st.Learners), Ready: s.ready(ctx, st, statusReadyWait) == ""}
	if d, ok := s.leaseRemaining(st); ok {
		ms := d.Milliseconds()
		out.LeaseRemainingMS = &ms
	}
	if s.cfg.LocalLeader != nil {
		out.LocalLeader, _ = s.cfg.LocalLeader()
	}
	return out
}

// leaseRemaining is how long this process's lease still runs, if it leads,
// by the clock the Node reads.
func (s *Server) leaseRemaining(st edictlog.Status) (time.Duration, bool) {
	if !st.IsLeader {
		return 0, false
	}
	d, ok := st.LeaseExpiry.Sub(s.cfg.Node.Clock().Now())
	return max(d, 0), ok
}

func ids(ps []edict.ProcessID) []uint64 {
	out := make([]uint64, 0, len(ps))
	for _, p := range ps {
		out = append(out, uint64(p))
	}
	return out
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.status(r.Context()))
}

// handleCluster answers with this process's view of the membership and
// each member's own status, asked for in parallel with a short deadline so
// that a dead member only costs that deadline.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.Node.Status()
	out := kvjson.ClusterJSON{Self: uint64(s.cfg.ID), Epoch: st.Epoch, Leader: uint64(st.Leader)}
	if st.Leader != edict.None {
		out.LeaderHTTPAddr = s.cfg.Directory.HTTPAddr(st.Leader)
	}
	if d, ok := s.leaseRemaining(st); ok {
		ms := d.Milliseconds()
		out.LeaseRemainingMS = &ms
	}
	for _, p := range st.Members {
		out.Members = append(out.Members, kvjson.MemberJSON{ID: uint64(p), Role: "member"})
	}
	for _, p := range st.Learners {
		out.Members = append(out.Members, kvjson.MemberJSON{ID: uint64(p), Role: "learner"})
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range out.Members {
		m := &out.Members[i]
		addrs := s.cfg.Directory.Addresses(edict.ProcessID(m.ID))
		m.HTTPAddr, m.GRPCAddr = addrs.HTTP, addrs.GRPC
		if match, ok := st.Match[edict.ProcessID(m.ID)]; ok {
			m.Match = &match
		}
		if edict.ProcessID(m.ID) == s.cfg.ID {
			own := s.status(ctx)
			m.Status = &own
			continue
		}
		if m.HTTPAddr == "" {
			m.StatusError = "HTTP address unknown"
			continue
		}
		wg.Go(func() {
			var ms kvjson.StatusJSON
			if err := getJSON(ctx, s.cfg.Client, "http://"+m.HTTPAddr+"/v1/status", &ms); err != nil {
				m.StatusError = err.Error()
				return
			}
			m.Status = &ms
		})
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, out)
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// decodeBody reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over the limit. It returns the raw body for forwarding.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, *apiError) {
	if len(r.URL.RawQuery) > 0 {
		return nil, errorf(http.StatusBadRequest, kvjson.CodeUnknownParameter, fmt.Sprintf("%s takes no query parameters (got %q)", r.URL.Path, r.URL.RawQuery))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.MaxBodyBytes)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(http.StatusRequestEntityTooLarge, kvjson.CodeValueTooLarge, fmt.Sprintf("body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes))
		}
		return nil, errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, fmt.Sprintf("reading the body: %v", err))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, errorf(http.StatusBadRequest, kvjson.CodeMalformedJSON, fmt.Sprintf("malformed JSON body: %v", err))
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, kvjson.CodeMalformedJSON, "malformed JSON body: data after the JSON value")
	}
	return body, nil
}

// admin runs op at the leader and answers kvjson.AdminResponse or the
// error.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, body []byte, what string, op func(ctx context.Context) (any, error)) {
	s.atLeader(w, r, body, false, true, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		res, err := op(ctx)
		if err != nil {
			return s.adminFailed(w, what, err)
		}
		writeJSON(w, http.StatusOK, kvjson.AdminResponse{OK: true, Result: res})
		return nil
	})
}

// adminFailed answers an admin call that failed, or returns the refusal
// that sends it to the leader.
func (s *Server) adminFailed(w http.ResponseWriter, what string, err error) error {
	var nle *edictlog.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return err
	case errors.Is(err, kvservice.ErrTimeout), errors.Is(err, kvservice.ErrStopped), errors.Is(err, context.DeadlineExceeded):
		writeError(w, s.errorOf(what, err))
	case errors.Is(err, edictlog.ErrQuorumLost):
		writeError(w, errorf(http.StatusServiceUnavailable, kvjson.CodeQuorumLost, fmt.Sprintf("%s: %v", what, err)))
	default:
		// The log refused: not a member, already a learner, ...
		writeError(w, errorf(http.StatusConflict, kvjson.CodeInvalidRequest, fmt.Sprintf("%s: %v", what, err)))
	}
	return nil
}

func checkID(id uint64) *apiError {
	if id == 0 {
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, "id must be a positive process id")
	}
	return nil
}

// handleTransfer hands leadership over through the router's handover
// gate, as a shutdown does: the calls the leader is serving finish first.
func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request) {
	var req kvjson.TransferRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	const what = "transfer leadership"
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout+s.cfg.Router.Wait())
	defer cancel()
	forward, relayed := s.forwarder(w, r, body, false, true), false
	target, err := s.cfg.Router.Transfer(ctx, route.ForwardedHTTP(r), edict.ProcessID(req.ID),
		func(ctx context.Context, leader edict.ProcessID) error {
			err := forward(ctx, leader)
			relayed = err == nil
			return err
		})
	var nle *edictlog.NotLeaderError
	switch {
	case errors.As(err, &nle):
		s.answerRouted(w, r, err)
	case err != nil:
		_ = s.adminFailed(w, what, err)
	case relayed:
		// The leader answered.
	case target == edict.None:
		writeError(w, errorf(http.StatusConflict, kvjson.CodeInvalidRequest, what+": no other member to transfer to"))
	default:
		writeJSON(w, http.StatusOK, kvjson.AdminResponse{OK: true, Result: map[string]uint64{"leader": uint64(target)}})
	}
}

func (s *Server) handleAddLearner(w http.ResponseWriter, r *http.Request) {
	var req kvjson.LearnerRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr == nil {
		aerr = checkID(req.ID)
	}
	if aerr == nil && (req.RaftAddr == "" || req.HTTPAddr == "") {
		aerr = errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, "raft_addr and http_addr are required")
	}
	if aerr == nil {
		aerr = checkAddresses(directory.Addresses{HTTP: req.HTTPAddr})
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, "add learner", func(ctx context.Context) (any, error) {
		// Refuse a process already in the cluster before the directory
		// write, which would otherwise overwrite its HTTP address (and
		// grow the log) for a request answered 409.
		id := edict.ProcessID(req.ID)
		if st := s.cfg.Node.Status(); slices.Contains(st.Members, id) || slices.Contains(st.Learners, id) {
			return nil, fmt.Errorf("process %d is already in epoch %d", req.ID, st.Epoch)
		}
		// Record the HTTP address first: once the learner is in, every
		// process must be able to forward to it should it come to lead.
		if err := s.cfg.Directory.Record(ctx, id, directory.Addresses{HTTP: req.HTTPAddr}); err != nil {
			return nil, err
		}
		return nil, s.cfg.Node.AddLearner(ctx, id, req.RaftAddr)
	})
}

func checkAddresses(a directory.Addresses) *apiError {
	if err := a.Validate(); err != nil {
		return errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, err.Error())
	}
	return nil
}

func (s *Server) handleAddresses(w http.ResponseWriter, r *http.Request) {
	var req kvjson.AddressesRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr == nil {
		aerr = checkID(req.ID)
	}
	if aerr == nil && req.HTTPAddr == "" && req.GRPCAddr == "" {
		aerr = errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, "http_addr or grpc_addr is required")
	}
	if aerr == nil {
		aerr = checkAddresses(directory.Addresses{HTTP: req.HTTPAddr, GRPC: req.GRPCAddr})
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, "publish addresses", func(ctx context.Context) (any, error) {
		return nil, s.cfg.Directory.Record(ctx, edict.ProcessID(req.ID), directory.Addresses{HTTP: req.HTTPAddr, GRPC: req.GRPCAddr})
	})
}

func (s *Server) handlePromote(w http.ResponseWriter, r *http.Request) {
	s.memberChange(w, r, "promote", s.cfg.Node.Promote)
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	s.memberChange(w, r, "remove", s.cfg.Node.Remove)
}

// memberChange serves the admin requests that name one member: decode and
// check the id, then run change on the leader.
func (s *Server) memberChange(w http.ResponseWriter, r *http.Request, what string, change func(context.Context, edict.ProcessID) error) {
	var req kvjson.MemberRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr == nil {
		aerr = checkID(req.ID)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, what, func(ctx context.Context) (any, error) {
		return nil, change(ctx, edict.ProcessID(req.ID))
	})
}

// handleRecover runs forced recovery on this process only: with the quorum
// lost there is no leader to forward to, and the operator runs it on every
// survivor with the same list.
func (s *Server) handleRecover(w http.ResponseWriter, r *http.Request) {
	var req kvjson.RecoverRequest
	_, aerr := s.decodeBody(w, r, &req)
	switch {
	case aerr != nil:
	case req.Confirm != kvjson.ConfirmRecovery:
		aerr = errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, fmt.Sprintf("forced recovery can lose acknowledged writes; set confirm to %q", kvjson.ConfirmRecovery))
	case len(req.Survivors) == 0 || slices.Contains(req.Survivors, 0):
		aerr = errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, "survivors must list positive process ids")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	survivors := make([]edict.ProcessID, 0, len(req.Survivors))
	for _, id := range req.Survivors {
		survivors = append(survivors, edict.ProcessID(id))
	}
	s.log.Warn("FORCED RECOVERY requested", "survivors", req.Survivors)
	epoch, err := s.cfg.Node.ForceRecovery(r.Context(), survivors)
	if err != nil {
		writeError(w, errorf(http.StatusConflict, kvjson.CodeInvalidRequest, fmt.Sprintf("forced recovery: %v", err)))
		return
	}
	writeJSON(w, http.StatusOK, kvjson.RecoverResponse{OK: true, Epoch: epoch})
}

// The read barrier of a readiness check waits at most this long: a
// process that cannot apply the leader's commit index within it is not
// ready. /v1/status waits less, so that /v1/cluster, which asks every
// member for it within a second, hears from a lagging member too.
const (
	readyWait       = time.Second
	statusReadyWait = 300 * time.Millisecond
)

// ready says why this process is not ready to serve, or "" if it is. A
// ready process is not shutting down, knows a leader, has applied
// everything it was told is committed, and — the read barrier — has
// applied at least the commit index the leader had when it was asked
// (edictlog.Node.Read at the follower level: the leader answers its commit
// index under its lease, and the read returns once this process has
// applied it; at the leader, a lease read). A process that restarted
// behind the others learns the leader, and its own commit index, before
// it has received what the leader committed meanwhile: without the
// barrier it would be ready while still catching up. The barrier waits
// at most wait, and ctx.
func (s *Server) ready(ctx context.Context, st edictlog.Status, wait time.Duration) string {
	switch {
	case s.draining.Load():
		return "shutting down"
	case st.Leader == edict.None:
		return "no leader known"
	case st.Applied < st.Commit:
		return "applied index " + strconv.FormatUint(st.Applied, 10) + " behind commit index " + strconv.FormatUint(st.Commit, 10)
	}
	bctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if _, err := s.cfg.Node.Read(bctx, edictlog.ReadFollower, nil); err != nil {
		// The read waits for a leader while none is known, and gives up
		// with a refusal when wait ends first.
		if nl := (*edictlog.NotLeaderError)(nil); errors.As(err, &nl) && bctx.Err() != nil {
			return fmt.Sprintf("no leader answered within %v: %v", wait, err)
		}
		if bctx.Err() != nil {
			return fmt.Sprintf("not caught up: the leader's commit index not applied within %v (applied index %d)", wait, s.cfg.Node.Status().Applied)
		}
		return "read barrier at the leader failed: " + err.Error()
	}
	return ""
}

func (s *Server) handleLivez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := s.ready(r.Context(), s.cfg.Node.Status(), readyWait); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: "+why+"\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}
