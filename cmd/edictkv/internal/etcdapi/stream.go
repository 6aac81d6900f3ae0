package etcdapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
)

// streamedMethods are the calls a process forwards to the leader over the
// forwarding stream (route.StreamMethod) rather than one by one: those
// whose answers are small (see route's stream.go).
var streamedMethods = map[string]bool{methodPut: true}

// forwardService serves the forwarding stream: the calls other processes
// send on to this one, in batches, answered in batches.
var forwardService = grpc.ServiceDesc{
	ServiceName: "edictkv.Forward",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: route.StreamDesc.StreamName, ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error { return srv.(*Server).serveForwarded(ss) }}},
}

// serveForwarded serves one forwarding stream: each call in it runs as
// the same call made here by a client that another process forwarded
// (refused as misdirected if this process does not lead, never
// forwarded again), on a worker of the stream's, and its answer goes
// back in the next batch. The stream ends when the forwarder closes it;
// or, once the API drains (Drain), when every call it ran is answered,
// with route.StreamDrained: the calls received after the drain are not
// run, and the forwarder routes them again.
func (s *Server) serveForwarded(ss grpc.ServerStream) error {
	ctx := ss.Context()
	if !route.ForwardedGRPC(ctx) {
		// Its calls must be refused, not forwarded again, where this
		// process does not lead: only a forwarder's stream is served.
		return status.Error(codes.InvalidArgument, "edictkv: the forwarding stream is for edictkv processes")
	}
	select {
	case <-s.drained:
		return route.StreamDrained
	default:
	}
	out := &answerQueue{wake: make(chan struct{}, 1)}
	sent := make(chan error, 1)
	go func() { sent <- out.send(ss) }()
	work := newWorkers()
	var calls sync.WaitGroup
	// mu orders the calls run against the drain: once draining is set,
	// no call received is run, and those run are all counted in calls.
	var mu sync.Mutex
	draining := false
	received := make(chan error, 1)
	go func() {
		for {
			var m wrapperspb.BytesValue
			if err := ss.RecvMsg(&m); err != nil {
				received <- err
				return
			}
			batch, err := route.DecodeStreamCalls(m.Value)
			if err != nil {
				received <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
			mu.Lock()
			if draining {
				// Never run: the drained stream's end tells the
				// forwarder to route them again.
				mu.Unlock()
				continue
			}
			for _, c := range batch {
				calls.Add(1)
				work.run(func() {
					defer calls.Done()
					out.add(s.serveStreamCall(ctx, c))
				})
			}
			mu.Unlock()
		}
	}()
	var err error
	select {
	case err = <-received:
	case <-s.drained:
		mu.Lock()
		draining = true
		mu.Unlock()
		err = route.StreamDrained
	}
	calls.Wait()
	work.stop()
	out.close()
	serr := <-sent
	switch {
	case errors.Is(err, io.EOF):
		return serr
	case err == route.StreamDrained && serr != nil:
		// The answers did not all go out: the forwarder must not take
		// the ones missing for calls that never ran.
		return serr
	}
	return err
}

// serveStreamCall runs one forwarded call and words its answer.
func (s *Server) serveStreamCall(ctx context.Context, c route.StreamCall) route.StreamAnswer {
	start := time.Now()
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var resp interface{ Marshal() ([]byte, error) }
	var err error
	switch c.Method {
	case methodPut:
		var r pb.PutRequest
		if err = r.Unmarshal(c.Request); err != nil {
			err = status.Errorf(codes.InvalidArgument, "edictkv: a forwarded Put that does not decode: %v", err)
			break
		}
		resp, err = (&kvServer{s: s}).Put(ctx, &r)
	default:
		err = status.Errorf(codes.Unimplemented, "edictkv does not forward %s in a stream", c.Method)
	}
	err = s.finish(c.Method, start, err)
	a := route.StreamAnswer{ID: c.ID}
	if err == nil {
		if a.Body, err = resp.Marshal(); err == nil {
			return a
		}
		err = status.Errorf(codes.Internal, "edictkv: encode the answer: %v", err)
	}
	st := status.Convert(err)
	a.Code, a.Body = st.Code(), []byte(st.Message())
	return a
}

// answerQueue holds a stream's answers until its sender sends them.
type answerQueue struct {
	mu     sync.Mutex
	queue  []route.StreamAnswer
	closed bool
	wake   chan struct{}
}

func (q *answerQueue) add(a route.StreamAnswer) {
	q.mu.Lock()
	q.queue = append(q.queue, a)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close makes send return once it has sent every answer queued.
func (q *answerQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// send sends the answers as they come, those queued meanwhile together,
// until the queue is closed and empty or the stream fails.
func (q *answerQueue) send(ss grpc.ServerStream) error {
	var buf []byte
	var take []route.StreamAnswer
	for {
		<-q.wake
		for {
			q.mu.Lock()
			take, q.queue = q.queue, take[:0]
			closed := q.closed
			q.mu.Unlock()
			if len(take) == 0 {
				if closed {
					return nil
				}
				break
			}
			for len(take) > 0 {
				buf = route.NewStreamBatch(buf)
				n := 0
				for n < len(take) && (n == 0 || len(buf)+len(take[n].Body)+24 <= route.MaxBatchBytes) {
					buf = route.AppendStreamAnswer(buf, take[n])
					n++
				}
				take = take[n:]
				if err := ss.SendMsg(&wrapperspb.BytesValue{Value: buf}); err != nil {
					// The forwarder's calls fail with the stream; the calls
					// still running here end with its context.
					q.mu.Lock()
					q.closed = true
					q.mu.Unlock()
					return err
				}
			}
			take = take[:0]
		}
	}
}

// workers run a stream's calls, each on a goroutine that has served
// calls before when one is idle: a new goroutine's stack would grow
// again under every call (see streamWorkers). A worker idle for
// workerIdle ends.
type workers struct {
	calls chan func()
	done  chan struct{}
}

const workerIdle = 10 * time.Second

func newWorkers() *workers { return &workers{calls: make(chan func()), done: make(chan struct{})} }

func (w *workers) run(f func()) {
	select {
	case w.calls <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.calls:
		case <-idle.C:
			return
		case <-w.done:
			return
		}
	}
}

// stop ends the idle workers; none may run a call after.
func (w *workers) stop() { close(w.done) }
