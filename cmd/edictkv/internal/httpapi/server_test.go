package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// fakeNode is the log's status and admin side, as told.
type fakeNode struct {
	mu       sync.Mutex
	st       edictlog.Status
	clock    *edict.ManualClock
	learners map[edict.ProcessID]string
	// barrier, if set, answers Read, the read barrier readiness asks
	// for; levels are the levels it was asked at.
	barrier func(context.Context) error
	levels  []edictlog.ReadLevel
}

func (n *fakeNode) Read(ctx context.Context, level edictlog.ReadLevel, _ []byte) (edictlog.ReadResult, error) {
	n.mu.Lock()
	n.levels = append(n.levels, level)
	barrier := n.barrier
	n.mu.Unlock()
	if barrier != nil {
		if err := barrier(ctx); err != nil {
			return edictlog.ReadResult{}, err
		}
	}
	return edictlog.ReadResult{Level: level}, nil
}

func (n *fakeNode) Status() edictlog.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}
func (n *fakeNode) Clock() edict.Clock { return n.clock }
func (n *fakeNode) AddLearner(_ context.Context, id edict.ProcessID, addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.learners[id] = addr
	return nil
}
func (n *fakeNode) Promote(context.Context, edict.ProcessID) error {
	return errors.New("log: process is not a learner")
}
func (n *fakeNode) Remove(_ context.Context, id edict.ProcessID) error {
	if id == 9 {
		return &edictlog.MembershipError{Op: "remove", Process: id, Err: edictlog.ErrQuorumLost}
	}
	return nil
}
func (n *fakeNode) ForceRecovery(context.Context, []edict.ProcessID) (uint64, error) {
	return 7, nil
}

// fakeRouter serves here while self leads, forwards otherwise, and gives
// up at once when no leader is known.
type fakeRouter struct {
	mu     sync.Mutex
	self   edict.ProcessID
	leader edict.ProcessID
	// transferred is what Transfer hands over to (None: no other member).
	transferred edict.ProcessID
}

func (r *fakeRouter) lead(leader edict.ProcessID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = leader
}

func (r *fakeRouter) where(forwarded bool) (here bool, leader edict.ProcessID, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.leader == r.self:
		return true, r.leader, nil
	case r.leader == edict.None:
		return false, edict.None, &edictlog.NotLeaderError{Err: route.ErrNoLeader}
	case forwarded:
		return false, r.leader, &edictlog.NotLeaderError{Leader: r.leader, Err: route.ErrMisdirected}
	}
	return false, r.leader, nil
}

func (r *fakeRouter) Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
	forward func(context.Context, edict.ProcessID) error) error {
	here, leader, err := r.where(forwarded)
	switch {
	case err != nil:
		return err
	case here:
		return serve(ctx)
	}
	return forward(ctx, leader)
}

func (r *fakeRouter) Retry(ctx context.Context, try func(context.Context) error) error {
	return try(ctx)
}

func (r *fakeRouter) Transfer(ctx context.Context, forwarded bool, target edict.ProcessID,
	forward func(context.Context, edict.ProcessID) error) (edict.ProcessID, error) {
	here, leader, err := r.where(forwarded)
	switch {
	case err != nil:
		return edict.None, err
	case !here:
		return edict.None, forward(ctx, leader)
	case target != edict.None:
		return target, nil
	}
	return r.transferred, nil
}

func (r *fakeRouter) Wait() time.Duration { return time.Second }

type fixture struct {
	srv    *Server
	log    *fakelog.Log
	node   *fakeNode
	router *fakeRouter
	dir    *directory.Directory
}

// newFixture builds a Server of process 1, leading, over a fakelog;
// each of with may change its Config.
func newFixture(t testing.TB, with ...func(*Config)) *fixture {
	t.Helper()
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	kv, err := kvservice.New(kvservice.Config{Log: fl, State: fl.State, Limits: kvservice.Limits{MaxKeyBytes: 16, MaxValueBytes: 32}})
	require.NoError(t, err)
	dir, err := directory.New(directory.Config{Self: 1, SelfAddrs: directory.Addresses{HTTP: "127.0.0.1:8001"},
		Known: map[edict.ProcessID]directory.Addresses{2: {HTTP: "127.0.0.1:8002"}},
		Store: directory.StateStore{Log: fl, State: fl.State}})
	require.NoError(t, err)
	node := &fakeNode{st: edictlog.Status{ID: 1, Epoch: 1, Leader: 1, IsLeader: true, Members: []edict.ProcessID{1, 2, 3}},
		clock: edict.NewManualClock(edict.Time{Incarnation: 1}), learners: map[edict.ProcessID]string{}}
	router := &fakeRouter{self: 1, leader: 1}
	cfg := Config{ID: 1, Node: node, KV: kv, Router: router, Directory: dir, MaxBodyBytes: 256,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, w := range with {
		w(&cfg)
	}
	srv, err := New(cfg)
	require.NoError(t, err)
	return &fixture{srv: srv, log: fl, node: node, router: router, dir: dir}
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (f *fixture) do(t testing.TB, method, target, body string, headers ...string) answer {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return answer{code: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

func (a answer) errorBody(t *testing.T) kvjson.ErrorJSON {
	t.Helper()
	var e kvjson.ErrorJSON
	require.NoError(t, json.Unmarshal(a.body, &e), "%s", a.body)
	return e
}

func stampTokenAt(i uint64) string { return stampToken(fakelog.StampAt(i)) }

// The key-value endpoints over the KV service, each answer with its
// index, stamp and code, as docs/edictkv.md describes them.
func TestKVEndpoints(t *testing.T) {
	f := newFixture(t)
	type step struct {
		name, method, target, body string
		code                       int
		errCode                    string
		check                      func(*testing.T, answer)
	}
	steps := []step{
		{"put", "PUT", "/v1/kv/a", "hello", 200, "", func(t *testing.T, a answer) {
			var w kvjson.WriteResponse
			require.NoError(t, json.Unmarshal(a.body, &w))
			assert.Equal(t, kvjson.WriteResponse{Key: "a", Index: 2, Stamp: stampJSON(fakelog.StampAt(1))}, w, "entry 1 made revision 2")
			assert.Equal(t, "2", a.header.Get(kvjson.HeaderIndex))
			assert.Equal(t, "2", a.header.Get(kvjson.HeaderModIndex))
			assert.Equal(t, stampTokenAt(1), a.header.Get(kvjson.HeaderStamp))
			assert.Equal(t, "1", a.header.Get(kvjson.HeaderServedBy))
		}},
		{"get", "GET", "/v1/kv/a", "", 200, "", func(t *testing.T, a answer) {
			var g kvjson.GetResponse
			require.NoError(t, json.Unmarshal(a.body, &g))
			require.NotNil(t, g.Value)
			assert.Equal(t, "hello", *g.Value)
			assert.Equal(t, uint64(2), g.Index)
			assert.Equal(t, "lease", g.Consistency)
			assert.Equal(t, stampTokenAt(1), g.Stamp.Token)
			assert.Equal(t, "lease", a.header.Get(kvjson.HeaderConsistency))
		}},
		{"put again, with the previous value", "PUT", "/v1/kv/a", "\xff", 200, "", func(t *testing.T, a answer) {
			var w kvjson.WriteResponse
			require.NoError(t, json.Unmarshal(a.body, &w))
			require.NotNil(t, w.Prev)
			assert.Equal(t, "hello", *w.Prev.Value)
			assert.Equal(t, stampTokenAt(1), w.Prev.Stamp.Token)
		}},
		{"a value that is not UTF-8", "GET", "/v1/kv/a", "", 200, "", func(t *testing.T, a answer) {
			var g kvjson.GetResponse
			require.NoError(t, json.Unmarshal(a.body, &g))
			assert.Nil(t, g.Value)
			assert.Equal(t, "/w==", g.ValueBase64)
		}},
		{"read at the current revision", "GET", "/v1/kv/a?revision=3", "", 200, "", nil},
		{"read at a past revision", "GET", "/v1/kv/a?revision=2", "", 200, "", func(t *testing.T, a answer) {
			var g kvjson.GetResponse
			require.NoError(t, json.Unmarshal(a.body, &g))
			require.NotNil(t, g.Value)
			assert.Equal(t, "hello", *g.Value, "the value at revision 2")
			assert.Equal(t, stampTokenAt(1), g.Stamp.Token)
			assert.Equal(t, uint64(3), g.Index, "the state's current revision")
		}},
		{"read before the first write", "GET", "/v1/kv/a?revision=1", "", 404, kvjson.CodeNotFound, nil},
		{"read at a future revision", "GET", "/v1/kv/a?revision=9", "", 400, kvjson.CodeFutureRevision, nil},
		{"revision not a number", "GET", "/v1/kv/a?revision=x", "", 400, kvjson.CodeBadParameter, nil},
		{"revision zero", "GET", "/v1/kv/a?revision=0", "", 400, kvjson.CodeBadParameter, nil},
		{"revision on a write", "PUT", "/v1/kv/a?revision=2", "v", 400, kvjson.CodeUnknownParameter, nil},
		{"create only, but it exists", "PUT", "/v1/kv/a?cas=0", "x", 409, kvjson.CodeCASFailed, func(t *testing.T, a answer) {
			e := a.errorBody(t)
			require.NotNil(t, e.Current)
			assert.Equal(t, uint64(3), e.Current.ModIndex)
			assert.Equal(t, uint64(3), e.Index, "the failed compare made no revision")
			assert.Equal(t, "3", a.header.Get(kvjson.HeaderModIndex))
			assert.Empty(t, a.header.Get(kvjson.HeaderStamp))
		}},
		{"swap by index", "PUT", "/v1/kv/a?cas=3", "x", 200, "", func(t *testing.T, a answer) {
			assert.Equal(t, "4", a.header.Get(kvjson.HeaderModIndex))
		}},
		{"swap by a stale value", "PUT", "/v1/kv/a?prev=nope", "y", 409, kvjson.CodeCASFailed, nil},
		{"swap by value", "PUT", "/v1/kv/a?prev=x", "y", 200, "", nil},
		{"create only", "PUT", "/v1/kv/b?cas=0", "1", 200, "", nil},
		{"delete a missing key", "DELETE", "/v1/kv/missing", "", 404, kvjson.CodeNotFound, func(t *testing.T, a answer) {
			assert.Equal(t, uint64(6), a.errorBody(t).Index, "deleting nothing makes no revision")
		}},
		{"delete", "DELETE", "/v1/kv/a", "", 200, "", func(t *testing.T, a answer) {
			var w kvjson.WriteResponse
			require.NoError(t, json.Unmarshal(a.body, &w))
			assert.Equal(t, uint64(1), w.Deleted)
			assert.Equal(t, "y", *w.Prev.Value)
		}},
		{"read a missing key", "GET", "/v1/kv/a", "", 404, kvjson.CodeNotFound, func(t *testing.T, a answer) {
			assert.Equal(t, uint64(7), a.errorBody(t).Index)
		}},
		{"key too long", "PUT", "/v1/kv/" + strings.Repeat("k", 17), "x", 414, kvjson.CodeKeyTooLarge, nil},
		{"value too long", "PUT", "/v1/kv/k", strings.Repeat("v", 33), 413, kvjson.CodeValueTooLarge, nil},
		{"control character", "PUT", "/v1/kv/a%00b", "x", 400, kvjson.CodeInvalidKey, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			a := f.do(t, s.method, s.target, s.body)
			require.Equal(t, s.code, a.code, "%s", a.body)
			if s.errCode != "" {
				assert.Equal(t, s.errCode, a.errorBody(t).Code)
			}
			if s.check != nil {
				s.check(t, a)
			}
		})
	}
	assert.Len(t, f.log.Applied(), 9, "one entry per write, refused requests none")
}

// Where a request goes when this process does not lead, or no process
// does, and the answers that say so.
func TestRouting(t *testing.T) {
	f := newFixture(t)
	f.router.lead(2)
	f.log.Follow(2)
	f.log.SetStaleness(30 * time.Millisecond)
	a := f.do(t, "PUT", "/v1/kv/a?redirect", "x")
	require.Equal(t, http.StatusTemporaryRedirect, a.code)
	assert.Equal(t, "http://127.0.0.1:8002/v1/kv/a?redirect", a.header.Get("Location"))
	assert.Equal(t, kvjson.CodeNotLeader, a.errorBody(t).Code)

	a = f.do(t, "PUT", "/v1/kv/a", "x", kvjson.HeaderForwardedBy, "3")
	require.Equal(t, http.StatusMisdirectedRequest, a.code, "forwarded once only")

	a = f.do(t, "GET", "/v1/kv/missing?consistency=stale", "")
	require.Equal(t, http.StatusNotFound, a.code)
	assert.Equal(t, "stale", a.header.Get(kvjson.HeaderConsistency))

	// The default read is linearizable and answered here, as a follower
	// read; only a lease read asked for by name needs the leader.
	a = f.do(t, "GET", "/v1/kv/missing", "")
	require.Equal(t, http.StatusNotFound, a.code)
	assert.Equal(t, "follower", a.header.Get(kvjson.HeaderConsistency))
	assert.Equal(t, "1", a.header.Get(kvjson.HeaderServedBy))
	a = f.do(t, "GET", "/v1/kv/missing?consistency=lease&redirect", "")
	require.Equal(t, http.StatusTemporaryRedirect, a.code)
	assert.Equal(t, "http://127.0.0.1:8002/v1/kv/missing?consistency=lease&redirect", a.header.Get("Location"))

	f.router.lead(edict.None)
	a = f.do(t, "PUT", "/v1/kv/a", "x")
	require.Equal(t, http.StatusServiceUnavailable, a.code)
	assert.Equal(t, kvjson.CodeNoLeader, a.errorBody(t).Code)
	assert.Equal(t, "1", a.header.Get("Retry-After"))
	assert.Empty(t, f.log.Applied())
}

// errorOf is the HTTP API's one mapping of the KV service's errors.
func TestErrorOf(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		err    error
		status int
		code   string
		index  uint64
	}{
		{fmt.Errorf("write: %w", kvservice.ErrTimeout), 504, kvjson.CodeOutcomeUnknown, 0},
		{kvservice.ErrLeaderChanged, 503, kvjson.CodeNotCommitted, 0},
		{kvservice.ErrStopped, 503, kvjson.CodeShuttingDown, 0},
		{kvservice.ErrNoLeader, 503, kvjson.CodeNoLeader, 0},
		{fmt.Errorf("%w: key of 2000 bytes", kvservice.ErrKeyTooLarge), 414, kvjson.CodeKeyTooLarge, 0},
		{kvservice.ErrValueTooLarge, 413, kvjson.CodeValueTooLarge, 0},
		{kvservice.ErrRequestTooLarge, 413, kvjson.CodeValueTooLarge, 0},
		{kvservice.ErrEmptyKey, 400, kvjson.CodeInvalidKey, 0},
		{kvservice.ErrInvalid, 400, kvjson.CodeInvalidRequest, 0},
		{kvservice.ErrDuplicateKey, 400, kvjson.CodeInvalidRequest, 0},
		{kvservice.ErrTooManyOps, 400, kvjson.CodeInvalidRequest, 0},
		{kvservice.ErrUnsupported, 400, kvjson.CodeInvalidRequest, 0},
		{kvservice.ErrKeyNotFound, 404, kvjson.CodeNotFound, 0},
		{kvservice.ErrNoSpace, 507, kvjson.CodeNoSpace, 0},
		{fmt.Errorf("write: %w", kvservice.ErrCorrupt), 500, kvjson.CodeCorrupt, 0},
		{&kvservice.RevisionError{Requested: 3, Oldest: 9, Current: 9, Err: kvservice.ErrCompacted}, 410, kvjson.CodeCompacted, 9},
		{&kvservice.RevisionError{Requested: 30, Oldest: 9, Current: 9, Err: kvservice.ErrFutureRev}, 400, kvjson.CodeFutureRevision, 9},
		{context.DeadlineExceeded, 504, kvjson.CodeOutcomeUnknown, 0},
		{errors.New("the disk is on fire"), 500, kvjson.CodeInternal, 0},
	} {
		e := f.srv.errorOf("write", c.err)
		assert.Equal(t, c.status, e.status, "%v", c.err)
		assert.Equal(t, c.code, e.body.Code, "%v", c.err)
		assert.Equal(t, c.index, e.body.Index, "%v", c.err)
		assert.NotEmpty(t, e.body.Error)
	}
	f.log.FailApply(edictlog.ErrNotCommitted)
	a := f.do(t, "PUT", "/v1/kv/a", "x")
	assert.Equal(t, http.StatusServiceUnavailable, a.code)
	assert.Equal(t, kvjson.CodeNotCommitted, a.errorBody(t).Code)
}

// The admin endpoints check their bodies before the leader, record
// addresses in the directory, and answer kvjson's bodies.
func TestAdminEndpoints(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, "POST", "/v1/cluster/learners", `{"id":4,"raft_addr":"127.0.0.1:7004","http_addr":"no port"}`)
	require.Equal(t, http.StatusBadRequest, a.code)
	assert.Contains(t, a.errorBody(t).Error, "not host:port")
	a = f.do(t, "POST", "/v1/cluster/learners", `{"id":2,"raft_addr":"127.0.0.1:7002","http_addr":"127.0.0.1:8002"}`)
	require.Equal(t, http.StatusConflict, a.code)
	assert.Contains(t, a.errorBody(t).Error, "already in epoch 1")
	assert.Empty(t, f.log.Applied(), "refused before the directory write")

	a = f.do(t, "POST", "/v1/cluster/learners", `{"id":4,"raft_addr":"127.0.0.1:7004","http_addr":"127.0.0.1:8004"}`)
	require.Equal(t, http.StatusOK, a.code, "%s", a.body)
	assert.JSONEq(t, `{"ok":true,"result":null}`, string(a.body))
	assert.Equal(t, "127.0.0.1:7004", f.node.learners[4])
	assert.Equal(t, "127.0.0.1:8004", f.dir.HTTPAddr(4), "recorded before the learner was added")

	a = f.do(t, "POST", "/v1/cluster/addresses", `{"id":4,"grpc_addr":"127.0.0.1:2384"}`)
	require.Equal(t, http.StatusOK, a.code, "%s", a.body)
	assert.Equal(t, directory.Addresses{HTTP: "127.0.0.1:8004", GRPC: "127.0.0.1:2384"}, f.dir.Addresses(4))
	a = f.do(t, "POST", "/v1/cluster/addresses", `{"id":4}`)
	require.Equal(t, http.StatusBadRequest, a.code)

	a = f.do(t, "POST", "/v1/cluster/promote", `{"id":3}`)
	require.Equal(t, http.StatusConflict, a.code, "the log's refusal")
	assert.Contains(t, a.errorBody(t).Error, "promote: log: process is not a learner")
	a = f.do(t, "POST", "/v1/cluster/remove", `{"id":9}`)
	require.Equal(t, http.StatusServiceUnavailable, a.code, "a change that would lose the quorum: %s", a.body)
	assert.Equal(t, kvjson.CodeQuorumLost, a.errorBody(t).Code)

	a = f.do(t, "POST", "/v1/cluster/transfer", `{"id":3}`)
	require.Equal(t, http.StatusOK, a.code, "%s", a.body)
	assert.JSONEq(t, `{"ok":true,"result":{"leader":3}}`, string(a.body))
	a = f.do(t, "POST", "/v1/cluster/transfer", `{"id":0}`)
	require.Equal(t, http.StatusConflict, a.code)
	assert.Contains(t, a.errorBody(t).Error, "no other member")
	f.router.lead(edict.None)
	a = f.do(t, "POST", "/v1/cluster/transfer", `{"id":0}`)
	require.Equal(t, http.StatusServiceUnavailable, a.code)

	a = f.do(t, "POST", "/v1/cluster/recover", `{"survivors":[1],"confirm":"`+kvjson.ConfirmRecovery+`"}`)
	require.Equal(t, http.StatusOK, a.code)
	assert.JSONEq(t, `{"ok":true,"epoch":7}`, string(a.body))

	var st kvjson.StatusJSON
	a = f.do(t, "GET", "/v1/status", "")
	require.NoError(t, json.Unmarshal(a.body, &st))
	assert.Equal(t, []uint64{1, 2, 3}, st.Members)
	assert.True(t, st.Ready, "readiness follows the Node's view")
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/readyz", "").code)
	f.srv.Drain()
	a = f.do(t, "GET", "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, a.code)
	assert.Contains(t, string(a.body), "shutting down")
}

// A read below the compaction revision is 410, saying the current
// revision.
func TestReadCompacted(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"1", "2", "3"} {
		require.Equal(t, 200, f.do(t, "PUT", "/v1/kv/a", v).code) // revisions 2 to 4
	}
	data, err := (&kvstate.Request{Compaction: &pb.CompactionRequest{Revision: 3}}).Encode()
	require.NoError(t, err)
	_, err = f.log.Apply(context.Background(), data)
	require.NoError(t, err)
	a := f.do(t, "GET", "/v1/kv/a?revision=2", "")
	require.Equal(t, 410, a.code, "%s", a.body)
	assert.Equal(t, kvjson.CodeCompacted, a.errorBody(t).Code)
	assert.Equal(t, uint64(4), a.errorBody(t).Index, "says the current revision")
	assert.Contains(t, a.errorBody(t).Error, "before the oldest kept, 3")
	a = f.do(t, "GET", "/v1/kv/a?revision=3", "")
	require.Equal(t, 200, a.code, "%s", a.body)
}
