package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

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

func (s *Server) status() StatusJSON {
	st := s.cfg.Node.Status()
	out := StatusJSON{ID: uint64(s.cfg.ID), Epoch: st.Epoch, Leader: uint64(st.Leader), IsLeader: st.IsLeader,
		Commit: st.Commit, Applied: st.Applied, FirstIndex: st.FirstIndex, LastIndex: st.LastIndex,
		Members: ids(st.Members), Learners: ids(st.Learners), Ready: s.ready(st) == ""}
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
func (s *Server) leaseRemaining(st log.Status) (time.Duration, bool) {
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
	writeJSON(w, http.StatusOK, s.status())
}

// handleCluster answers with this process's view of the membership and
// each member's own status, asked for in parallel with a short deadline so
// that a dead member only costs that deadline.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.Node.Status()
	out := ClusterJSON{Self: uint64(s.cfg.ID), Epoch: st.Epoch, Leader: uint64(st.Leader)}
	if st.Leader != edict.None {
		out.LeaderHTTPAddr = s.httpAddr(st.Leader)
	}
	if d, ok := s.leaseRemaining(st); ok {
		ms := d.Milliseconds()
		out.LeaseRemainingMS = &ms
	}
	for _, p := range st.Members {
		out.Members = append(out.Members, MemberJSON{ID: uint64(p), Role: "member"})
	}
	for _, p := range st.Learners {
		out.Members = append(out.Members, MemberJSON{ID: uint64(p), Role: "learner"})
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range out.Members {
		m := &out.Members[i]
		m.HTTPAddr = s.httpAddr(edict.ProcessID(m.ID))
		m.GRPCAddr = s.GRPCAddr(edict.ProcessID(m.ID))
		if match, ok := st.Match[edict.ProcessID(m.ID)]; ok {
			m.Match = &match
		}
		if edict.ProcessID(m.ID) == s.cfg.ID {
			own := s.status()
			m.Status = &own
			continue
		}
		if m.HTTPAddr == "" {
			m.StatusError = "HTTP address unknown"
			continue
		}
		wg.Go(func() {
			var ms StatusJSON
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

// Admin requests: JSON bodies, decoded strictly.

// TransferRequest asks the leader to hand leadership to ID (0: the most
// up-to-date other member).
type TransferRequest struct {
	ID uint64 `json:"id"`
}

// LearnerRequest adds process ID as a learner: RaftAddr is its transport
// address, HTTPAddr its API address (put in the replicated registry).
type LearnerRequest struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// AddressesRequest records where process ID serves its APIs in the
// replicated registry. Every process publishes its own at start, so that
// the others can forward to it and list it; an empty address is left as it
// is.
type AddressesRequest struct {
	ID       uint64 `json:"id"`
	HTTPAddr string `json:"http_addr,omitempty"`
	GRPCAddr string `json:"grpc_addr,omitempty"`
}

// MemberRequest names one process (promote, remove).
type MemberRequest struct {
	ID uint64 `json:"id"`
}

// RecoverRequest forces a new epoch from Survivors after a quorum is lost
// for good. Confirm must be ConfirmRecovery: the operation is unsafe if
// any process left out is alive.
type RecoverRequest struct {
	Survivors []uint64 `json:"survivors"`
	Confirm   string   `json:"confirm"`
}

// ConfirmRecovery is the confirmation RecoverRequest.Confirm must carry.
const ConfirmRecovery = "I understand this can lose acknowledged writes"

// decodeBody reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over the limit. It returns the raw body for forwarding.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, *apiError) {
	if len(r.URL.RawQuery) > 0 {
		return nil, errorf(http.StatusBadRequest, CodeUnknownParameter, fmt.Sprintf("%s takes no query parameters (got %q)", r.URL.Path, r.URL.RawQuery))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.Limits.MaxBodyBytes)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(http.StatusRequestEntityTooLarge, CodeValueTooLarge, fmt.Sprintf("body exceeds the limit of %d bytes", s.cfg.Limits.MaxBodyBytes))
		}
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("reading the body: %v", err))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, errorf(http.StatusBadRequest, CodeMalformedJSON, fmt.Sprintf("malformed JSON body: %v", err))
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON body: data after the JSON value")
	}
	return body, nil
}

// admin runs op at the leader and answers {"ok":true,...} or the error.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, body []byte, what string, op func(ctx context.Context) (any, error)) {
	s.atLeader(w, r, body, false, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		defer cancel()
		res, err := op(ctx)
		var nle *log.NotLeaderError
		switch {
		case errors.As(err, &nle):
			return err
		case err != nil && (errors.Is(err, log.ErrOutcomeUnknown) || errors.Is(err, log.ErrShutdown) || errors.Is(err, context.DeadlineExceeded)):
			writeError(w, s.failure(what, err))
		case err != nil:
			// The log refused: not a member, already a learner, ...
			writeError(w, errorf(http.StatusConflict, CodeInvalidRequest, fmt.Sprintf("%s: %v", what, err)))
		default:
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": res})
		}
		return nil
	})
}

func checkID(id uint64) *apiError {
	if id == 0 {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, "id must be a positive process id")
	}
	return nil
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, "transfer leadership", func(ctx context.Context) (any, error) {
		target := edict.ProcessID(req.ID)
		if target == edict.None {
			target = s.transferTarget()
			if target == edict.None {
				return nil, errors.New("no other member to transfer to")
			}
		}
		return map[string]uint64{"leader": uint64(target)}, s.cfg.Node.TransferLeadership(ctx, target)
	})
}

// transferTarget is the other member the leader knows to have stored the
// most: it needs the least catching up.
func (s *Server) transferTarget() edict.ProcessID {
	st := s.cfg.Node.Status()
	best, bestMatch := edict.None, uint64(0)
	for _, p := range st.Members {
		if p == s.cfg.ID {
			continue
		}
		if m := st.Match[p]; best == edict.None || m > bestMatch {
			best, bestMatch = p, m
		}
	}
	return best
}

func (s *Server) handleAddLearner(w http.ResponseWriter, r *http.Request) {
	var req LearnerRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr == nil {
		aerr = checkID(req.ID)
	}
	if aerr == nil && (req.RaftAddr == "" || req.HTTPAddr == "") {
		aerr = errorf(http.StatusBadRequest, CodeInvalidRequest, "raft_addr and http_addr are required")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, "add learner", func(ctx context.Context) (any, error) {
		// Refuse a process already in the cluster before the registry
		// write, which would otherwise overwrite its HTTP address (and
		// grow the log) for a request answered 409.
		id := edict.ProcessID(req.ID)
		if st := s.cfg.Node.Status(); slices.Contains(st.Members, id) || slices.Contains(st.Learners, id) {
			return nil, fmt.Errorf("process %d is already in epoch %d", req.ID, st.Epoch)
		}
		// Register the HTTP address first: once the learner is in, every
		// process must be able to forward to it should it come to lead.
		if err := s.setRegistry(ctx, edict.ProcessID(req.ID), req.HTTPAddr); err != nil {
			return nil, err
		}
		return nil, s.cfg.Node.AddLearner(ctx, edict.ProcessID(req.ID), req.RaftAddr)
	})
}

func (s *Server) setRegistry(ctx context.Context, id edict.ProcessID, addr string) error {
	data, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: registryKey(id), Value: addr}})
	if err != nil {
		return err
	}
	_, err = s.cfg.Node.Apply(ctx, data)
	return err
}

func (s *Server) handleAddresses(w http.ResponseWriter, r *http.Request) {
	var req AddressesRequest
	body, aerr := s.decodeBody(w, r, &req)
	if aerr == nil {
		aerr = checkID(req.ID)
	}
	if aerr == nil && req.HTTPAddr == "" && req.GRPCAddr == "" {
		aerr = errorf(http.StatusBadRequest, CodeInvalidRequest, "http_addr or grpc_addr is required")
	}
	for _, a := range []string{req.HTTPAddr, req.GRPCAddr} {
		if _, _, err := net.SplitHostPort(a); aerr == nil && a != "" && err != nil {
			aerr = errorf(http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("address %q is not host:port: %v", a, err))
		}
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.admin(w, r, body, "publish addresses", func(ctx context.Context) (any, error) {
		id := edict.ProcessID(req.ID)
		var ops []kvfsm.Op
		if req.HTTPAddr != "" {
			ops = append(ops, kvfsm.Op{Put: &kvfsm.Put{Key: registryKey(id), Value: req.HTTPAddr}})
		}
		if req.GRPCAddr != "" {
			ops = append(ops, kvfsm.Op{Put: &kvfsm.Put{Key: grpcRegistryKey(id), Value: req.GRPCAddr}})
		}
		data, err := kvfsm.EncodeCommand(kvfsm.Command{Txn: &kvfsm.Txn{Success: ops}})
		if err != nil {
			return nil, err
		}
		_, err = s.cfg.Node.Apply(ctx, data)
		return nil, err
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
	var req MemberRequest
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
	var req RecoverRequest
	_, aerr := s.decodeBody(w, r, &req)
	switch {
	case aerr != nil:
	case req.Confirm != ConfirmRecovery:
		aerr = errorf(http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("forced recovery can lose acknowledged writes; set confirm to %q", ConfirmRecovery))
	case len(req.Survivors) == 0 || slices.Contains(req.Survivors, 0):
		aerr = errorf(http.StatusBadRequest, CodeInvalidRequest, "survivors must list positive process ids")
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
		writeError(w, errorf(http.StatusConflict, CodeInvalidRequest, fmt.Sprintf("forced recovery: %v", err)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "epoch": epoch})
}

// ready says why this process is not ready to serve, or "" if it is: it
// must know a leader and have applied everything it was told committed.
func (s *Server) ready(st log.Status) string {
	switch {
	case s.draining.Load():
		return "shutting down"
	case st.Leader == edict.None:
		return "no leader known"
	case st.Applied < st.Commit:
		return "applied index " + strconv.FormatUint(st.Applied, 10) + " behind commit index " + strconv.FormatUint(st.Commit, 10)
	}
	return ""
}

func (s *Server) handleLivez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := s.ready(s.cfg.Node.Status()); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: "+why+"\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}
