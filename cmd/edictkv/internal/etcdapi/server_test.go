package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

type fakeNode struct {
	mu    sync.Mutex
	st    edictlog.Status
	addrs map[edict.ProcessID]string // SetAddress
}

func (n *fakeNode) Status() edictlog.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}
func (n *fakeNode) ReignIndex() uint64 { return 17 }

// SetAddress records the address of a member or learner, as the log
// would once the change committed.
func (n *fakeNode) SetAddress(ctx context.Context, id edict.ProcessID, addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.st.Members, id) && !slices.Contains(n.st.Learners, id) {
		return &edictlog.MembershipError{Op: "change address", Process: id, Err: edictlog.ErrNotMember}
	}
	if n.addrs == nil {
		n.addrs = map[edict.ProcessID]string{}
	}
	n.addrs[id] = addr
	return nil
}

// addr is what SetAddress recorded for id.
func (n *fakeNode) addr(id edict.ProcessID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[id]
}

// fakeRouter serves here when self leads, forwards to the leader
// otherwise, refuses a forwarded call it cannot serve, and records
// handovers.
type fakeRouter struct {
	self, leader edict.ProcessID
	handedTo     edict.ProcessID
}

func (r *fakeRouter) Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
	forward func(context.Context, edict.ProcessID) error) error {
	switch {
	case r.leader == r.self:
		return serve(ctx)
	case r.leader == edict.None:
		return &edictlog.NotLeaderError{Err: route.ErrNoLeader}
	case forwarded:
		return &edictlog.NotLeaderError{Leader: r.leader, Err: route.ErrMisdirected}
	}
	return forward(ctx, r.leader)
}

// Retry tries once; a read refused for want of a leader is given up at
// once, as the router does once its wait ends.
func (r *fakeRouter) Retry(ctx context.Context, try func(context.Context) error) error {
	err := try(ctx)
	var nle *edictlog.NotLeaderError
	if errors.As(err, &nle) {
		return &edictlog.NotLeaderError{Leader: r.leader, Err: route.ErrNoLeader}
	}
	return err
}

func (r *fakeRouter) HandOver(ctx context.Context, target edict.ProcessID) (edict.ProcessID, error) {
	if r.leader != r.self {
		return edict.None, &edictlog.NotLeaderError{Leader: r.leader, Err: edictlog.ErrNotLeader}
	}
	r.handedTo = target
	return target, nil
}

// extraServerOptions are added to the API's own by startProcessWith (a
// benchmark's variants).
var extraServerOptions []grpc.ServerOption

// process is one etcd API on loopback gRPC over a fake log.
type process struct {
	api    *Server
	log    *fakelog.Log
	router *fakeRouter
	node   *fakeNode
	addr   string
	conn   *grpc.ClientConn
}

func startProcess(t testing.TB, id, leader edict.ProcessID, known map[edict.ProcessID]directory.Addresses) *process {
	t.Helper()
	return startProcessQuota(t, id, leader, known, 0)
}

// startProcessQuota starts a process whose KV service has the space quota
// quota over its state's store (0: the default).
func startProcessQuota(t testing.TB, id, leader edict.ProcessID, known map[edict.ProcessID]directory.Addresses, quota int64) *process {
	t.Helper()
	return startProcessWith(t, id, leader, known, func(kc *kvservice.Config, _ *Config) { kc.Quota.Bytes = quota })
}

// startProcessWith starts a process whose KV service and API configs
// configure has changed from the defaults above.
func startProcessWith(t testing.TB, id, leader edict.ProcessID, known map[edict.ProcessID]directory.Addresses,
	configure func(*kvservice.Config, *Config)) *process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	if leader != 1 || id != 1 {
		fl.Follow(leader)
	}
	kc := kvservice.Config{Log: fl, State: fl.State, Limits: kvservice.Limits{MaxKeyBytes: 16, MaxValueBytes: 32, MaxTxnOps: 4},
		Quota: kvservice.Quota{Size: fl.State.Store().Size, MemberID: uint64(id)}}
	ac := Config{ID: id, ClusterID: "test", Storage: fl.State.Store(), Watchable: fl.State.Store(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	configure(&kc, &ac)
	kv, err := kvservice.New(kc)
	require.NoError(t, err)
	dir, err := directory.New(directory.Config{Self: id, SelfAddrs: directory.Addresses{GRPC: ln.Addr().String()},
		SelfPeer: fmt.Sprintf("127.0.0.1:%d", 7000+id), Known: known, Store: directory.StateStore{Log: fl, State: fl.State}})
	require.NoError(t, err)
	p := &process{log: fl, router: &fakeRouter{self: id, leader: leader}, addr: ln.Addr().String(),
		node: &fakeNode{st: edictlog.Status{ID: id, Leader: leader, IsLeader: id == leader, Members: []edict.ProcessID{1, 2}, Learners: []edict.ProcessID{3}}}}
	ac.Node, ac.KV, ac.Router, ac.Directory = p.node, kv, p.router, dir
	p.api, err = New(ac)
	require.NoError(t, err)
	g := grpc.NewServer(append(p.api.ServerOptions(), extraServerOptions...)...)
	p.api.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() {
		g.Stop()
		_ = p.api.Close()
	})
	p.conn, err = grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { p.conn.Close() })
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Calls that need the leader are forwarded to it by name and answered as
// its own; reads are answered where they were asked; etcd's errors come
// back as etcd's.
func TestKVThroughAFollower(t *testing.T) {
	leader := startProcess(t, 1, 1, nil)
	// The follower reads the leader's state: replicated, as far as the
	// fake log goes.
	follower := startProcessWith(t, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}},
		func(kc *kvservice.Config, _ *Config) { kc.State = leader.log.State })
	kv, ctx := pb.NewKVClient(follower.conn), ctxT(t)

	put, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	assert.Equal(t, int64(2), put.Header.Revision, "etcd's revisions: the first write makes 2")
	assert.Equal(t, uint64(2), put.Header.MemberId, "the process asked answers")
	assert.Equal(t, uint64(17), put.Header.RaftTerm)
	assert.NotZero(t, put.Header.ClusterId)
	require.Len(t, leader.log.Applied(), 1, "applied at the leader")
	assert.Empty(t, follower.log.Applied())

	got, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1, "a linearizable read, answered here")
	assert.Equal(t, uint64(2), got.Header.MemberId)
	local, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Serializable: true})
	require.NoError(t, err)
	require.Len(t, local.Kvs, 1, "a serializable read, answered here")

	txn, err := kv.Txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a"), PrevKv: true}}}}})
	require.NoError(t, err)
	require.True(t, txn.Succeeded)
	assert.Len(t, txn.Responses[0].GetResponseDeleteRange().PrevKvs, 1)

	op := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("d")}}}
	for _, c := range []struct {
		name string
		call func() error
		want error
		code codes.Code
	}{
		{"duplicate key, from the leader", func() error {
			_, err := kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{op, op}})
			return err
		}, rpctypes.ErrDuplicateKey, codes.InvalidArgument},
		{"too many ops", func() error {
			_, err := kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{op, op, op, op, op}})
			return err
		}, rpctypes.ErrTooManyOps, codes.InvalidArgument},
		{"no key", func() error { _, err := kv.Put(ctx, &pb.PutRequest{}); return err }, rpctypes.ErrEmptyKey, codes.InvalidArgument},
		{"past revision", func() error {
			// Compacted at revision 3 (the txn's delete), removed from
			// the store before Compact answers.
			resp, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: 3, Physical: true})
			require.NoError(t, err)
			assert.Equal(t, int64(3), resp.Header.Revision)
			_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: 2})
			return err
		}, rpctypes.ErrCompacted, codes.OutOfRange},
		{"future revision", func() error {
			_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: 100})
			return err
		}, rpctypes.ErrFutureRev, codes.OutOfRange},
		{"lease", func() error { _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("l"), Lease: 3}); return err }, nil, codes.Unimplemented},
		{"compact at a future revision", func() error { _, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: 100}); return err },
			rpctypes.ErrFutureRev, codes.OutOfRange},
		{"value too large", func() error {
			_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("v"), Value: make([]byte, 33)})
			return err
		}, nil, codes.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.Error(t, err)
			assert.Equal(t, c.code, status.Code(err), "%v", err)
			if c.want != nil {
				assert.Equal(t, c.want, rpctypes.Error(err), "clientv3 sees etcd's error")
			}
		})
	}
	_, err = kv.Compact(ctx, &pb.CompactionRequest{Revision: 3})
	assert.Equal(t, rpctypes.ErrCompacted, rpctypes.Error(err), "compacted already")

	// A call forwarded to a process that does not lead is refused, to be
	// routed again: never forwarded a second time.
	fctx := metadata.AppendToOutgoingContext(ctx, "edictkv-forwarded-by", "3")
	_, err = kv.Put(fctx, &pb.PutRequest{Key: []byte("a")})
	assert.Equal(t, route.MisdirectedGRPC.Error(), err.Error())

	// With no leader, etcd's "no leader".
	follower.router.leader = edict.None
	_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	assert.Equal(t, rpctypes.ErrNoLeader, rpctypes.Error(err))
}

// statusOf maps every error of the KV service's taxonomy to etcd's.
func TestStatusOf(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	for _, c := range []struct {
		err  error
		want error
	}{
		{kvservice.ErrEmptyKey, rpctypes.ErrGRPCEmptyKey},
		{fmt.Errorf("op 2: %w", kvservice.ErrTooManyOps), rpctypes.ErrGRPCTooManyOps},
		{kvservice.ErrDuplicateKey, rpctypes.ErrGRPCDuplicateKey},
		{kvservice.ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge},
		{kvservice.ErrNoSpace, rpctypes.ErrGRPCNoSpace},
		{kvservice.ErrKeyNotFound, rpctypes.ErrGRPCKeyNotFound},
		{&kvservice.RevisionError{Requested: 1, Oldest: 5, Current: 5, Err: kvservice.ErrCompacted}, rpctypes.ErrGRPCCompacted},
		{&kvservice.RevisionError{Requested: 9, Oldest: 5, Current: 5, Err: kvservice.ErrFutureRev}, rpctypes.ErrGRPCFutureRev},
		{fmt.Errorf("write: %w", kvservice.ErrTimeout), rpctypes.ErrGRPCTimeout},
		{kvservice.ErrLeaderChanged, rpctypes.ErrGRPCLeaderChanged},
		{kvservice.ErrStopped, rpctypes.ErrGRPCStopped},
		{kvservice.ErrNoLeader, rpctypes.ErrGRPCNoLeader},
	} {
		assert.Equal(t, c.want, p.api.statusOf("Put", c.err), "%v", c.err)
	}
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("%w: key of 20 bytes", kvservice.ErrKeyTooLarge), codes.InvalidArgument},
		{kvservice.ErrValueTooLarge, codes.InvalidArgument},
		{kvservice.ErrInvalid, codes.InvalidArgument},
		{kvservice.ErrUnsupported, codes.Unimplemented},
		{context.Canceled, codes.Canceled},
		{errors.New("the disk is on fire"), codes.Internal},
		{status.Error(codes.Aborted, "the leader's own"), codes.Aborted},
	} {
		assert.Equal(t, c.code, status.Code(p.api.statusOf("Put", c.err)), "%v", c.err)
	}
}

// Cluster and Maintenance answer from the Node and the directory;
// MoveLeader hands over through the router's gate.
func TestClusterAndMaintenance(t *testing.T) {
	leader := startProcess(t, 1, 1, map[edict.ProcessID]directory.Addresses{2: {GRPC: "127.0.0.1:2382"}})
	ctx := ctxT(t)
	ml, err := pb.NewClusterClient(leader.conn).MemberList(ctx, &pb.MemberListRequest{})
	require.NoError(t, err)
	require.Len(t, ml.Members, 3)
	assert.Equal(t, "edictkv-1", ml.Members[0].Name)
	assert.Equal(t, []string{"http://" + leader.addr}, ml.Members[0].ClientURLs)
	assert.Equal(t, []string{"tcp://127.0.0.1:7001"}, ml.Members[0].PeerURLs)
	assert.Equal(t, []string{"http://127.0.0.1:2382"}, ml.Members[1].ClientURLs)
	assert.Empty(t, ml.Members[2].ClientURLs, "an address not known is left out")
	assert.True(t, ml.Members[2].IsLearner)

	m := pb.NewMaintenanceClient(leader.conn)
	st, err := m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, Version, st.Version)
	assert.Equal(t, uint64(1), st.Leader)
	assert.Equal(t, uint64(17), st.RaftTerm)

	_, err = m.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 9})
	assert.Equal(t, rpctypes.ErrBadLeaderTransferee, rpctypes.Error(err))
	_, err = m.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 2})
	require.NoError(t, err)
	assert.Equal(t, edict.ProcessID(2), leader.router.handedTo)

	follower := startProcess(t, 2, 1, nil)
	_, err = pb.NewMaintenanceClient(follower.conn).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 1})
	assert.Equal(t, rpctypes.ErrNotLeader, rpctypes.Error(err), "only the leader moves leadership, as in etcd")

	_, err = pb.NewLeaseClient(leader.conn).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 5})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	assert.Contains(t, err.Error(), "LeaseGrant")
}

// Alarms go through the log, as etcd's: NOSPACE refuses puts with etcd's
// error until it is deactivated; deletes go on.
func TestAlarms(t *testing.T) {
	leader := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	m, kv := pb.NewMaintenanceClient(leader.conn), pb.NewKVClient(leader.conn)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	list, err := m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	require.NoError(t, err)
	assert.Empty(t, list.Alarms)
	act, err := m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NOSPACE})
	require.NoError(t, err)
	assert.Equal(t, []*pb.AlarmMember{{MemberID: 1, Alarm: pb.AlarmType_NOSPACE}}, act.Alarms)
	assert.Equal(t, int64(2), act.Header.Revision)

	_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("1")})
	assert.Equal(t, rpctypes.ErrNoSpace, rpctypes.Error(err))
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b")}}}}})
	assert.Equal(t, rpctypes.ErrNoSpace, rpctypes.Error(err))
	del, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), del.Deleted)

	list, err = m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	require.NoError(t, err)
	require.Len(t, list.Alarms, 1)
	_, err = m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NOSPACE})
	require.NoError(t, err)
	_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("1")})
	require.NoError(t, err)
	_, err = m.Alarm(ctx, &pb.AlarmRequest{Action: 9})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// Each call is counted by method and code, and timed by method.
func TestRequestMetrics(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	kv, ctx := pb.NewKVClient(p.conn), ctxT(t)
	for range 3 {
		_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
		require.NoError(t, err)
	}
	_, err := kv.Put(ctx, &pb.PutRequest{})
	require.Error(t, err)
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Serializable: true})
	require.NoError(t, err)
	count := func(method string, code codes.Code) float64 {
		return testutil.ToFloat64(p.api.metrics.requests.WithLabelValues(method, code.String()))
	}
	assert.Equal(t, 3.0, count(methodPut, codes.OK))
	assert.Equal(t, 1.0, count(methodPut, codes.InvalidArgument))
	assert.Equal(t, 1.0, count(methodRange, codes.OK))
	assert.Equal(t, 2, testutil.CollectAndCount(p.api.metrics.seconds), "one histogram per method")
}
