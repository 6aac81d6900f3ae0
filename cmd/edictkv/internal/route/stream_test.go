package route_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

// streamLeader serves the forwarding stream as fakeKV serves Put: each
// call answered as its key says, every batch counted.
type streamLeader struct {
	kv       *fakeKV
	batches  atomic.Int64
	calls    atomic.Int64
	held     chan struct{} // "hold" calls wait for it to close
	received chan struct{} // told of each "hold" call received
}

func (l *streamLeader) serve(srv any, ss grpc.ServerStream) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for {
		var m wrapperspb.BytesValue
		if err := ss.RecvMsg(&m); err != nil {
			wg.Wait()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		calls, err := route.DecodeStreamCalls(m.Value)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		l.batches.Add(1)
		for _, c := range calls {
			var r pb.PutRequest
			if err := r.Unmarshal(c.Request); err == nil && string(r.Key) == "drain" {
				wg.Wait()
				return route.StreamDrained // this call, unanswered, never ran
			}
			l.calls.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r pb.PutRequest
				if err := r.Unmarshal(c.Request); err != nil {
					panic(err)
				}
				ctx := ss.Context()
				if string(r.Key) == "hold" {
					l.received <- struct{}{}
					<-l.held
				}
				if c.Timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.Timeout)
					defer cancel()
				}
				resp, err := l.kv.Put(ctx, &r)
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					err = status.FromContextError(err).Err() // as gRPC answers a handler's
				}
				a := route.StreamAnswer{ID: c.ID}
				if err != nil {
					st := status.Convert(err)
					a.Code, a.Body = st.Code(), []byte(st.Message())
				} else {
					a.Body, _ = resp.Marshal()
				}
				mu.Lock()
				defer mu.Unlock()
				if err := ss.SendMsg(&wrapperspb.BytesValue{Value: route.AppendStreamAnswer(route.NewStreamBatch(nil), a)}); err != nil {
					return
				}
			}()
		}
	}
}

func startStreamLeader(t *testing.T, withStream bool) (*streamLeader, *grpc.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	l := &streamLeader{kv: &fakeKV{forwarded: make(chan bool, 1000)}, held: make(chan struct{}), received: make(chan struct{}, 10)}
	pb.RegisterKVServer(g, l.kv)
	if withStream {
		g.RegisterService(&grpc.ServiceDesc{ServiceName: "edictkv.Forward", HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{StreamName: route.StreamDesc.StreamName, ServerStreams: true, ClientStreams: true, Handler: l.serve}}}, l)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return l, g, ln.Addr().String()
}

// Calls forwarded over the stream are answered as the unary forwarder's
// are — the answer, the leader's own error, a refusal to look again, the
// caller's deadline — and those made together share batches.
func TestStreamedForwarder(t *testing.T) {
	l, _, addr := startStreamLeader(t, true)
	f := route.NewGRPCForwarder(2, func(id edict.ProcessID) string {
		if id == 1 {
			return addr
		}
		return ""
	})
	defer f.Close()
	ctx := context.Background()
	const put = "/etcdserverpb.KV/Put"
	call := func(ctx context.Context, key string) (*pb.PutResponse, error) {
		var out pb.PutResponse
		err := f.InvokeStreamed(ctx, 1, put, &pb.PutRequest{Key: []byte(key)}, &out, true)
		return &out, err
	}

	out, err := call(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(42), out.Header.Revision)
	_, err = call(ctx, "misdirected")
	requireLookAgain(t, err, route.ErrMoved)
	_, err = call(ctx, "duplicate")
	assert.Equal(t, rpctypes.ErrDuplicateKey, rpctypes.Error(err), "the leader's own answer")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = call(short, "slow")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "the caller's deadline, which the leader is told")
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, f.InvokeStreamed(ctx, 3, put, &pb.PutRequest{Key: []byte("k")}, &pb.PutResponse{}, true), &nle)

	// 200 callers at once: every call answered once. (How many share a
	// batch depends on the scheduler: those queued while one is sent go
	// in the next.)
	before, beforeCalls := l.batches.Load(), l.calls.Load()
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := call(ctx, "k")
			if assert.NoError(t, err) {
				assert.Equal(t, int64(42), out.Header.Revision)
			}
		}()
	}
	wg.Wait()
	batches, calls := l.batches.Load()-before, l.calls.Load()-beforeCalls
	assert.Equal(t, int64(200), calls)
	t.Logf("200 calls in %d batches", batches)
	for range len(l.kv.forwarded) {
		assert.True(t, <-l.kv.forwarded, "the leader sees every call as forwarded")
	}
}

// A write the stream carried before it broke has an unknown outcome and
// is not sent again, unless the leader drained the stream; the next call
// opens a new stream.
func TestStreamedForwarderBreaks(t *testing.T) {
	l, g, addr := startStreamLeader(t, true)
	f := route.NewGRPCForwarder(2, func(edict.ProcessID) string { return addr })
	defer f.Close()
	ctx := context.Background()
	const put = "/etcdserverpb.KV/Put"
	errs := make(chan error, 1)
	go func() {
		errs <- f.InvokeStreamed(ctx, 1, put, &pb.PutRequest{Key: []byte("hold")}, &pb.PutResponse{}, true)
	}()
	<-l.received
	g.Stop() // the connection breaks with the call in flight
	err := <-errs
	require.ErrorIs(t, err, edictlog.ErrOutcomeUnknown)
	close(l.held)

	// A leader that drains ends the stream once it has answered what it
	// ran: a call left unanswered never ran, and is routed again.
	_, g3, addr3 := startStreamLeader(t, true)
	defer g3.Stop()
	f3 := route.NewGRPCForwarder(2, func(edict.ProcessID) string { return addr3 })
	defer f3.Close()
	requireLookAgain(t, f3.InvokeStreamed(ctx, 1, put, &pb.PutRequest{Key: []byte("drain")}, &pb.PutResponse{}, true), route.ErrMoved)

	_, g2, addr2 := startStreamLeader(t, true)
	defer g2.Stop()
	f2 := route.NewGRPCForwarder(2, func(edict.ProcessID) string { return addr2 })
	defer f2.Close()
	var out pb.PutResponse
	require.NoError(t, f2.InvokeStreamed(ctx, 1, put, &pb.PutRequest{Key: []byte("k")}, &out, true))

	require.NoError(t, f.Close())
	require.Error(t, f.InvokeStreamed(ctx, 1, put, &pb.PutRequest{Key: []byte("k")}, &out, true), "closed")
}

// A leader that serves no forwarding stream (an older edictkv) gets the
// calls one by one: none is lost or doubled on the way.
func TestStreamedForwarderFallsBack(t *testing.T) {
	l, _, addr := startStreamLeader(t, false)
	f := route.NewGRPCForwarder(2, func(edict.ProcessID) string { return addr })
	defer f.Close()
	for range 3 {
		var out pb.PutResponse
		require.NoError(t, f.InvokeStreamed(context.Background(), 1, "/etcdserverpb.KV/Put", &pb.PutRequest{Key: []byte("k")}, &out, true))
		assert.Equal(t, int64(42), out.Header.Revision)
	}
	assert.Len(t, l.kv.forwarded, 3, "each call reached the leader once")
}

func FuzzDecodeStreamCalls(f *testing.F) {
	b := route.NewStreamBatch(nil)
	b = route.AppendStreamCall(b, route.StreamCall{ID: 1, Method: "/etcdserverpb.KV/Put", Timeout: time.Second, Request: []byte("req")})
	b = route.AppendStreamCall(b, route.StreamCall{ID: 300, Method: "m", Request: nil})
	f.Add(b)
	f.Add([]byte{1})
	f.Add([]byte{2, 1})
	f.Add(b[:len(b)-2])
	f.Fuzz(func(t *testing.T, data []byte) {
		calls, err := route.DecodeStreamCalls(data)
		if err != nil {
			if !errors.Is(err, route.ErrBadBatch) {
				t.Fatalf("an error that is not ErrBadBatch: %v", err)
			}
			return
		}
		again := route.NewStreamBatch(nil)
		for _, c := range calls {
			again = route.AppendStreamCall(again, c)
		}
		back, err := route.DecodeStreamCalls(again)
		if err != nil || len(back) != len(calls) {
			t.Fatalf("a decoded batch does not decode again: %v", err)
		}
		for i := range calls {
			if back[i].ID != calls[i].ID || back[i].Method != calls[i].Method || back[i].Timeout != calls[i].Timeout ||
				!bytes.Equal(back[i].Request, calls[i].Request) {
				t.Fatalf("call %d: %+v, again %+v", i, calls[i], back[i])
			}
		}
	})
}

func FuzzDecodeStreamAnswers(f *testing.F) {
	b := route.NewStreamBatch(nil)
	b = route.AppendStreamAnswer(b, route.StreamAnswer{ID: 7, Body: []byte("reply")})
	b = route.AppendStreamAnswer(b, route.StreamAnswer{ID: 8, Code: codes.Unavailable, Body: []byte("no leader")})
	f.Add(b)
	f.Add([]byte{1, 1, 17, 0})
	f.Add(b[:len(b)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		answers, err := route.DecodeStreamAnswers(data)
		if err != nil {
			if !errors.Is(err, route.ErrBadBatch) {
				t.Fatalf("an error that is not ErrBadBatch: %v", err)
			}
			return
		}
		again := route.NewStreamBatch(nil)
		for _, a := range answers {
			again = route.AppendStreamAnswer(again, a)
		}
		back, err := route.DecodeStreamAnswers(again)
		if err != nil || len(back) != len(answers) {
			t.Fatalf("a decoded batch does not decode again: %v", err)
		}
		for i := range answers {
			if back[i].ID != answers[i].ID || back[i].Code != answers[i].Code || !bytes.Equal(back[i].Body, answers[i].Body) {
				t.Fatalf("answer %d: %+v, again %+v", i, answers[i], back[i])
			}
		}
	})
}
