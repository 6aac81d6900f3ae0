package etcdhttp

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// fakeKV answers Range with one key, or fails as told; it records the
// serializable flag of each Range.
type fakeKV struct {
	pb.UnimplementedKVServer
	mu           sync.Mutex
	fail         error
	serializable []bool
}

func (f *fakeKV) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serializable = append(f.serializable, r.Serializable)
	if f.fail != nil {
		return nil, f.fail
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 7, MemberId: 1},
		Kvs: []*mvccpb.KeyValue{{Key: []byte("a"), Value: []byte("x"), CreateRevision: 2, ModRevision: 7, Version: 3}}, Count: 1}, nil
}

func (f *fakeKV) failWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

type fakeNode struct {
	mu sync.Mutex
	st edictlog.Status
}

func (n *fakeNode) Status() edictlog.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}

func (n *fakeNode) set(st edictlog.Status) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.st = st
}

type fixture struct {
	kv     *fakeKV
	node   *fakeNode
	alarms []*pb.AlarmMember
	mu     sync.Mutex
	srv    *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{kv: &fakeKV{}, node: &fakeNode{st: edictlog.Status{ID: 1, Leader: 2, Members: []edict.ProcessID{1, 2, 3}}}}
	gs := grpc.NewServer()
	pb.RegisterKVServer(gs, f.kv)
	pb.RegisterLeaseServer(gs, &pb.UnimplementedLeaseServer{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	h, err := New(context.Background(), Config{ID: 1, Conn: conn, Node: f.node, Version: "3.6.8",
		Alarms: func() []*pb.AlarmMember {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.alarms
		},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "process_resident_memory_bytes 1\n") }),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) alarm(as ...pb.AlarmType) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alarms = nil
	for _, a := range as {
		f.alarms = append(f.alarms, &pb.AlarmMember{MemberID: 1, Alarm: a})
	}
}

func (f *fixture) do(t *testing.T, method, path, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// The gateway is etcd's: its JSON (proto names, int64s as strings, bytes
// in base64), /v3beta/ as /v3/, a gRPC error as its HTTP status with the
// gRPC code, a path it does not route as 404, and etcd's CORS.
func TestGateway(t *testing.T) {
	f := newFixture(t)
	code, h, body := f.do(t, "POST", "/v3/kv/range", `{"key":"YQ==","serializable":true,"unknown_field":1}`)
	require.Equal(t, 200, code, body)
	assert.JSONEq(t, `{"header":{"revision":"7","member_id":"1"},"kvs":[{"key":"YQ==","value":"eA==","create_revision":"2","mod_revision":"7","version":"3"}],"count":"1"}`, body)
	assert.Equal(t, "*", h.Get("Access-Control-Allow-Origin"))
	code, _, body = f.do(t, "POST", "/v3beta/kv/range", `{"key":"YQ=="}`)
	assert.Equal(t, 200, code, body)
	code, _, body = f.do(t, "POST", "/v3/kv/put", `{"key":"YQ=="}`)
	assert.Equal(t, http.StatusNotImplemented, code)
	assert.Contains(t, body, `"code":12`)
	f.kv.failWith(rpctypes.ErrGRPCCompacted)
	code, _, body = f.do(t, "POST", "/v3/kv/range", `{"key":"YQ==","revision":"1"}`)
	assert.Equal(t, http.StatusBadRequest, code, "OutOfRange, as etcd's gateway answers it")
	assert.JSONEq(t, `{"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}`, body)
	code, _, _ = f.do(t, "POST", "/v3/kv/range", `{"key":`)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _, _ = f.do(t, "POST", "/v3/lock/lock", `{"name":"bA=="}`)
	assert.Equal(t, http.StatusNotFound, code, "no Lock service")
	code, h, _ = f.do(t, "OPTIONS", "/v3/kv/range", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "POST, GET, OPTIONS, PUT, DELETE", h.Get("Access-Control-Allow-Methods"))
}

// /health, /livez and /readyz check what etcd's do, in etcd's formats.
func TestHealth(t *testing.T) {
	f := newFixture(t)
	health := func(q string) (int, string) {
		code, _, body := f.do(t, "GET", "/health"+q, "")
		return code, strings.TrimSpace(body)
	}
	code, body := health("")
	assert.Equal(t, 200, code)
	assert.Equal(t, `{"health":"true","reason":""}`, body)
	assert.Equal(t, []bool{false}, f.kv.serializable, "a linearizable read")

	f.alarm(pb.AlarmType_NOSPACE)
	code, body = health("")
	assert.Equal(t, 503, code)
	assert.Equal(t, `{"health":"false","reason":"ALARM NOSPACE"}`, body)
	code, _ = health("?exclude=NOSPACE")
	assert.Equal(t, 200, code)
	f.alarm(pb.AlarmType_CORRUPT)
	_, body = health("?exclude=NOSPACE")
	assert.Equal(t, `{"health":"false","reason":"ALARM CORRUPT"}`, body)
	f.alarm()

	f.node.set(edictlog.Status{ID: 1})
	code, body = health("")
	assert.Equal(t, 503, code)
	assert.Equal(t, `{"health":"false","reason":"RAFT NO LEADER"}`, body)
	code, _ = health("?serializable=true")
	assert.Equal(t, 200, code, "a serializable check needs no leader")
	f.node.set(edictlog.Status{ID: 1, Leader: 2})

	f.kv.failWith(rpctypes.ErrGRPCNoLeader)
	code, body = health("")
	assert.Equal(t, 503, code)
	assert.Equal(t, `{"health":"false","reason":"RANGE ERROR:rpc error: code = Unavailable desc = etcdserver: no leader"}`, body)
	code, _, _ = f.do(t, "POST", "/health", "")
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	code, _, body = f.do(t, "GET", "/livez", "")
	assert.Equal(t, 503, code)
	assert.Equal(t, "[-]serializable_read failed: rpc error: code = Unavailable desc = etcdserver: no leader\n\n", body, "http.Error's newline after the report, as etcd's")
	f.kv.failWith(nil)
	code, _, body = f.do(t, "GET", "/livez", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)

	f.alarm(pb.AlarmType_CORRUPT)
	f.node.set(edictlog.Status{ID: 1, Leader: 2, Learners: []edict.ProcessID{1}})
	code, _, body = f.do(t, "GET", "/readyz", "")
	assert.Equal(t, 503, code)
	assert.Equal(t, "[-]data_corruption failed: alarm activated: CORRUPT\n[+]serializable_read ok\n[+]linearizable_read ok\n[-]non_learner failed: not supported for learner\n\n", body)
	code, _, body = f.do(t, "GET", "/readyz?exclude=data_corruption&exclude=non_learner&verbose", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "[+]serializable_read ok\n[+]linearizable_read ok\nok\n", body)
	code, _, _ = f.do(t, "GET", "/readyz/non_learner", "")
	assert.Equal(t, 503, code)
	code, _, body = f.do(t, "GET", "/readyz/serializable_read", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)
}

func TestVersionAndMetrics(t *testing.T) {
	f := newFixture(t)
	code, h, body := f.do(t, "GET", "/version", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.JSONEq(t, `{"etcdserver":"3.6.8","etcdcluster":"3.6.0","storage":"3.6.0"}`, body)
	_, _, body = f.do(t, "GET", "/metrics", "")
	assert.Equal(t, "process_resident_memory_bytes 1\n", body)
}
