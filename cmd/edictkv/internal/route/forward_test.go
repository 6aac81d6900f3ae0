package route_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// The HTTP forwarder marks the call, relays the leader's answer, and
// tells a call worth another look from one whose outcome is unknown.
func TestHTTPForwarder(t *testing.T) {
	var mu sync.Mutex
	var marked []string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		marked = append(marked, r.Header.Get(kvjson.HeaderForwardedBy))
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "misdirected":
			w.WriteHeader(http.StatusMisdirectedRequest)
		case "hang up":
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
		default:
			w.Header().Set(kvjson.HeaderServedBy, "1")
			w.Header().Set("X-Other", "dropped")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(append([]byte("echo "), body...))
		}
	}))
	defer leader.Close()
	addr := strings.TrimPrefix(leader.URL, "http://")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := closed.Addr().String()
	closed.Close()

	f := &route.HTTPForwarder{Self: 2, Timeout: 5 * time.Second}
	for _, c := range []struct {
		name  string
		addr  string
		body  string
		write bool
		check func(*testing.T, *httptest.ResponseRecorder, error)
	}{
		{"relayed", addr, "hello", true, func(t *testing.T, w *httptest.ResponseRecorder, err error) {
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "echo hello", w.Body.String())
			assert.Equal(t, "1", w.Header().Get(kvjson.HeaderServedBy))
			assert.Empty(t, w.Header().Get("X-Other"), "only the API's own headers are relayed")
		}},
		{"the target does not lead", addr, "misdirected", true, func(t *testing.T, w *httptest.ResponseRecorder, err error) {
			requireLookAgain(t, err, route.ErrMoved)
			assert.Zero(t, w.Body.Len(), "nothing written")
		}},
		{"a read that broke is looked at again", addr, "hang up", false, func(t *testing.T, w *httptest.ResponseRecorder, err error) {
			requireLookAgain(t, err, route.ErrUnreachable)
		}},
		{"a write that broke after it was sent", addr, "hang up", true, func(t *testing.T, w *httptest.ResponseRecorder, err error) {
			require.ErrorIs(t, err, edictlog.ErrOutcomeUnknown)
			var nle *edictlog.NotLeaderError
			require.False(t, errors.As(err, &nle), "never sent again")
			assert.Zero(t, w.Body.Len())
		}},
		{"a write that could not connect", deadAddr, "x", true, func(t *testing.T, w *httptest.ResponseRecorder, err error) {
			requireLookAgain(t, err, route.ErrUnreachable)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/v1/kv/k?cas=0", strings.NewReader(c.body))
			w := httptest.NewRecorder()
			c.check(t, w, f.Forward(w, r, 1, c.addr, []byte(c.body), c.write))
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, marked)
	for _, m := range marked {
		assert.Equal(t, "2", m, "marked as forwarded by process 2")
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	assert.False(t, route.ForwardedHTTP(r))
	r.Header.Set(kvjson.HeaderForwardedBy, "3")
	assert.True(t, route.ForwardedHTTP(r))
}

func requireLookAgain(t *testing.T, err error, why error) {
	t.Helper()
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	require.ErrorIs(t, err, why)
	require.Equal(t, edict.ProcessID(1), nle.Leader)
}

// fakeKV answers etcd's KV calls as told by the request's key.
type fakeKV struct {
	pb.UnimplementedKVServer
	forwarded chan bool
}

func (f *fakeKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	f.forwarded <- route.ForwardedGRPC(ctx)
	switch string(r.Key) {
	case "misdirected":
		return nil, route.MisdirectedGRPC
	case "duplicate":
		return nil, rpctypes.ErrGRPCDuplicateKey
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &pb.PutResponse{Header: &pb.ResponseHeader{Revision: 42}}, nil
}

// The gRPC forwarder calls any unary method by its name, marks it, and
// sorts what comes back: the answer, the leader's refusal to look again,
// the leader's own error, or a transport failure.
func TestGRPCForwarder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	kv := &fakeKV{forwarded: make(chan bool, 10)}
	pb.RegisterKVServer(g, kv)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()

	addrs := map[edict.ProcessID]string{1: ln.Addr().String()}
	f := route.NewGRPCForwarder(2, func(id edict.ProcessID) string { return addrs[id] })
	defer f.Close()
	ctx := context.Background()
	const put = "/etcdserverpb.KV/Put"

	var out pb.PutResponse
	require.NoError(t, f.Invoke(ctx, 1, put, &pb.PutRequest{Key: []byte("k")}, &out, true))
	assert.Equal(t, int64(42), out.Header.Revision)
	assert.True(t, <-kv.forwarded, "the leader sees the call as forwarded")

	requireLookAgain(t, f.Invoke(ctx, 1, put, &pb.PutRequest{Key: []byte("misdirected")}, &out, true), route.ErrMoved)
	<-kv.forwarded
	err = f.Invoke(ctx, 1, put, &pb.PutRequest{Key: []byte("duplicate")}, &out, true)
	<-kv.forwarded
	assert.Equal(t, rpctypes.ErrDuplicateKey, rpctypes.Error(err), "the leader's own answer")

	// An unknown address is not sent at all.
	err = f.Invoke(ctx, 3, put, &pb.PutRequest{Key: []byte("k")}, &out, true)
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	require.ErrorIs(t, err, route.ErrNoAddress)

	// The caller's deadline is the caller's.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = f.Invoke(short, 1, put, &pb.PutRequest{Key: []byte("slow")}, &out, true)
	<-kv.forwarded
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))

	// A leader that went away: a write sent into a dead connection is
	// never sent again, a read is looked at again.
	g.Stop()
	for _, write := range []bool{false, true} {
		err = f.Invoke(ctx, 1, put, &pb.PutRequest{Key: []byte("k")}, &out, write)
		require.Error(t, err)
		if !errors.As(err, &nle) {
			require.True(t, write, "a read is always looked at again: %v", err)
			require.ErrorIs(t, err, edictlog.ErrOutcomeUnknown)
		}
	}

	require.NoError(t, f.Close())
	require.Error(t, f.Invoke(ctx, 1, put, &pb.PutRequest{Key: []byte("k")}, &out, false), "closed")
}
