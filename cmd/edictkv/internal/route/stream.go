package route

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// Forwarded calls in batches: the calls a process sends on to the leader
// share one gRPC stream per leader, and those queued while one batch is
// being sent go together in the next; the answers come back the same
// way. A unary call forwarded on its own costs both processes an HTTP/2
// stream (headers encoded and parsed, a goroutine, trailers) for a
// message of a few hundred bytes: in a profile of 64 clients' puts over
// three members, the leader spent a third of its CPU in gRPC's server,
// two thirds of whose calls were forwarded ones. A batch costs that once.
//
// Each message of the stream is a wrapperspb.BytesValue holding a batch,
// so that the stream needs gRPC's default codec only:
//
//	version    1 byte, streamVersion
//	calls      one after another to the end, each
//	  id       uvarint, the call's number on the stream
//	  (a call, from the forwarder)
//	  method   uvarint length, then the full gRPC method name
//	  timeout  uvarint, microseconds the caller still waits (0: no deadline)
//	  request  uvarint length, then the request's protobuf encoding
//	  (an answer, from the leader)
//	  code     uvarint, the gRPC status code (OK: the reply follows)
//	  body     uvarint length, then the reply's protobuf encoding, or the
//	           status message
//
// A stream carries only calls whose answers are small (a Put's is its
// header and previous pair): one stream's messages go out one after
// another, and an answer of hundreds of megabytes would hold up every
// other. Calls that may answer much (a Txn's ranges, a DeleteRange's
// previous pairs) are forwarded on their own (Invoke).
const (
	// StreamMethod is the forwarding stream's full gRPC method name.
	StreamMethod  = "/edictkv.Forward/Calls"
	streamVersion = 1
	// MaxBatchBytes bounds a batch of calls or answers: a larger call
	// (the limit is what one log entry carries) goes alone.
	MaxBatchBytes = 1 << 20
	// maxMethodBytes bounds a method name in a batch.
	maxMethodBytes = 256
)

// A leader that drains (it is shutting down) ends each forwarding stream
// with StreamDrained once it has answered every call it ran: the calls
// of the stream left unanswered then ran nowhere, and are routed again.
const drainedMsg = "edictkv: the forwarding stream is drained: no call left unanswered ran"

// StreamDrained ends a drained forwarding stream.
var StreamDrained = status.Error(codes.Unavailable, drainedMsg)

// StreamDesc describes the forwarding stream, for a server's
// grpc.ServiceDesc and the forwarder's client.
var StreamDesc = grpc.StreamDesc{StreamName: "Calls", ServerStreams: true, ClientStreams: true}

// StreamCall is one call of a batch, as the leader receives it.
type StreamCall struct {
	ID      uint64
	Method  string
	Timeout time.Duration
	Request []byte
}

// StreamAnswer is one answer of a batch, as the forwarder receives it.
type StreamAnswer struct {
	ID   uint64
	Code codes.Code
	// Body is the reply's encoding when Code is OK, else the status
	// message.
	Body []byte
}

// AppendStreamCall appends c to a batch (start one with NewStreamBatch).
func AppendStreamCall(b []byte, c StreamCall) []byte {
	b = binary.AppendUvarint(b, c.ID)
	b = binary.AppendUvarint(b, uint64(len(c.Method)))
	b = append(b, c.Method...)
	b = binary.AppendUvarint(b, uint64(max(c.Timeout, 0)/time.Microsecond))
	b = binary.AppendUvarint(b, uint64(len(c.Request)))
	return append(b, c.Request...)
}

// AppendStreamAnswer appends a to a batch (start one with NewStreamBatch).
func AppendStreamAnswer(b []byte, a StreamAnswer) []byte {
	b = binary.AppendUvarint(b, a.ID)
	b = binary.AppendUvarint(b, uint64(a.Code))
	b = binary.AppendUvarint(b, uint64(len(a.Body)))
	return append(b, a.Body...)
}

// NewStreamBatch starts a batch in b's storage.
func NewStreamBatch(b []byte) []byte { return append(b[:0], streamVersion) }

// ErrBadBatch wraps every error about a batch that is not one this
// package wrote.
var ErrBadBatch = errors.New("route: bad forwarding batch")

type batchReader struct {
	b   []byte
	err error
}

func (r *batchReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: %s: a bad varint", ErrBadBatch, what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) bytes(what string, limit int) []byte {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) || n > uint64(limit) {
		r.err = fmt.Errorf("%w: %s of %d bytes: %d left, at most %d", ErrBadBatch, what, n, len(r.b), limit)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func openBatch(b []byte) (*batchReader, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty", ErrBadBatch)
	case b[0] != streamVersion:
		return nil, fmt.Errorf("%w: version %d, not %d", ErrBadBatch, b[0], streamVersion)
	}
	return &batchReader{b: b[1:]}, nil
}

// DecodeStreamCalls decodes a batch of calls. The requests alias b.
func DecodeStreamCalls(b []byte) ([]StreamCall, error) {
	r, err := openBatch(b)
	if err != nil {
		return nil, err
	}
	var out []StreamCall
	for len(r.b) > 0 {
		c := StreamCall{ID: r.uvarint("id"), Method: string(r.bytes("method", maxMethodBytes))}
		us := r.uvarint("timeout")
		if us > uint64(24*time.Hour/time.Microsecond) {
			return nil, fmt.Errorf("%w: a timeout of %d us", ErrBadBatch, us)
		}
		c.Timeout = time.Duration(us) * time.Microsecond
		c.Request = r.bytes("request", len(b))
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, c)
	}
	return out, nil
}

// DecodeStreamAnswers decodes a batch of answers. The bodies alias b.
func DecodeStreamAnswers(b []byte) ([]StreamAnswer, error) {
	r, err := openBatch(b)
	if err != nil {
		return nil, err
	}
	var out []StreamAnswer
	for len(r.b) > 0 {
		a := StreamAnswer{ID: r.uvarint("id")}
		code := r.uvarint("code")
		if r.err == nil && code > uint64(codes.Unauthenticated) {
			return nil, fmt.Errorf("%w: status code %d", ErrBadBatch, code)
		}
		a.Code = codes.Code(code)
		a.Body = r.bytes("body", len(b))
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, a)
	}
	return out, nil
}

// Marshaler and Unmarshaler are what a call streamed to the leader needs
// of its request and reply: etcd's messages have both methods.
type (
	Marshaler   interface{ Marshal() ([]byte, error) }
	Unmarshaler interface{ Unmarshal([]byte) error }
)

// InvokeStreamed calls method at leader, as Invoke does, over the
// forwarding stream to leader (see StreamMethod), with the answers Invoke
// gives: nil, the leader's own error answer, a *edictlog.NotLeaderError for a
// call worth another look (not sent: no address, no connection; or
// refused as misdirected), an error wrapping edictlog.ErrOutcomeUnknown for a
// write whose stream broke after it was sent, or ctx's error. A call
// whose ctx ends while it waits is answered at once; its answer, when it
// comes, is dropped.
func (f *GRPCForwarder) InvokeStreamed(ctx context.Context, leader edict.ProcessID, method string, req Marshaler, reply Unmarshaler, write bool) error {
	body, err := req.Marshal()
	if err != nil {
		return status.Errorf(codes.Internal, "route: encode the %s request: %v", method, err)
	}
	if f.unstreamed(leader) {
		return f.Invoke(ctx, leader, method, req, reply, write)
	}
	st, err := f.stream(ctx, leader)
	if err != nil {
		return err
	}
	c := &streamCall{StreamCall: StreamCall{Method: method, Request: body}, done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = max(time.Until(dl), time.Microsecond)
	}
	if !st.enqueue(c) {
		return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: the forwarding stream broke", ErrUnreachable)}
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		st.drop(c)
		return status.FromContextError(ctx.Err()).Err()
	}
	switch {
	case errors.Is(c.err, errNoStream):
		// Nothing ran: the leader has no forwarding stream.
		return f.Invoke(ctx, leader, method, req, reply, write)
	case errors.Is(c.err, errDrained):
		return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: %w", ErrMoved, c.err)}
	case c.err != nil && c.sent && write:
		return fmt.Errorf("%w: forwarding %s to the leader (process %d) failed after it was sent: %w",
			edictlog.ErrOutcomeUnknown, method, leader, c.err)
	case c.err != nil:
		return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: %w", ErrUnreachable, c.err)}
	case c.answer.Code == codes.OK:
		if err := reply.Unmarshal(c.answer.Body); err != nil {
			return status.Errorf(codes.Internal, "route: decode the leader's %s reply: %v", method, err)
		}
		return nil
	case c.answer.Code == codes.Unavailable && string(c.answer.Body) == misdirectedMsg:
		return &edictlog.NotLeaderError{Leader: leader, Err: ErrMoved}
	}
	return status.Error(c.answer.Code, string(c.answer.Body))
}

// errNoStream fails the calls of a stream the leader does not serve (an
// edictkv from before it): the server found no handler, so none ran.
var errNoStream = errors.New("route: the leader serves no forwarding stream")

// errDrained fails the calls left unanswered on a stream the leader
// ended with StreamDrained: none of them ran.
var errDrained = errors.New("route: the leader drained the forwarding stream")

// unstreamed reports whether leader, at its current address, serves no
// forwarding stream: its calls are forwarded one by one.
func (f *GRPCForwarder) unstreamed(leader edict.ProcessID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr, ok := f.noStream[leader]
	return ok && addr == f.addr(leader)
}

// streamCall is a call on its way: queued, then sent, then answered
// (answer) or failed (err); done is closed then.
type streamCall struct {
	StreamCall
	sent   bool
	answer StreamAnswer
	err    error
	done   chan struct{}
}

// callStream is the forwarding stream to one leader: a goroutine sends
// the queued calls in batches, another delivers the answers. Once it
// breaks, every call on it fails and the forwarder opens a new one for
// the next call.
type callStream struct {
	f      *GRPCForwarder
	leader edict.ProcessID
	addr   string // the leader's address it was opened to
	cs     grpc.ClientStream
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []*streamCall
	pending map[uint64]*streamCall
	nextID  uint64
	broken  error
	wake    chan struct{}
	stopped chan struct{} // closed once broken
}

// stream returns the forwarding stream to leader, opening it if there is
// none.
func (f *GRPCForwarder) stream(ctx context.Context, leader edict.ProcessID) (*callStream, error) {
	f.mu.Lock()
	if st, ok := f.streams[leader]; ok {
		f.mu.Unlock()
		return st, nil
	}
	f.mu.Unlock()
	c, err := f.conn(leader)
	if err != nil {
		return nil, &edictlog.NotLeaderError{Leader: leader, Err: err}
	}
	if c.GetState() == connectivity.TransientFailure {
		c.Connect()
		return nil, &edictlog.NotLeaderError{Leader: leader, Err: ErrUnreachable}
	}
	f.opening.Lock() // one stream opened at a time: no two to one leader
	defer f.opening.Unlock()
	f.mu.Lock()
	if st, ok := f.streams[leader]; ok {
		f.mu.Unlock()
		return st, nil
	}
	closed := f.streams == nil
	f.mu.Unlock()
	if closed {
		return nil, &edictlog.NotLeaderError{Leader: leader, Err: errors.New("route: the gRPC forwarder is closed")}
	}
	sctx, cancel := context.WithCancel(context.Background())
	sctx = metadata.AppendToOutgoingContext(sctx, forwardedBy, strconv.FormatUint(uint64(f.self), 10))
	// Opening waits for the connection while it connects, as long as the
	// caller would; the stream itself outlives the caller.
	stop := context.AfterFunc(ctx, cancel)
	cs, err := c.NewStream(sctx, &StreamDesc, StreamMethod)
	if !stop() && err == nil {
		err = ctx.Err() // cancelled as it opened
	}
	if err != nil {
		cancel()
		if done := ctx.Err(); done != nil {
			return nil, status.FromContextError(done).Err()
		}
		return nil, &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: open the forwarding stream: %w", ErrUnreachable, err)}
	}
	st := &callStream{f: f, leader: leader, addr: f.addr(leader), cs: cs, cancel: cancel, pending: map[uint64]*streamCall{},
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	f.mu.Lock()
	if f.streams == nil {
		f.mu.Unlock()
		cancel()
		return nil, &edictlog.NotLeaderError{Leader: leader, Err: errors.New("route: the gRPC forwarder is closed")}
	}
	f.streams[leader] = st
	f.mu.Unlock()
	go st.send()
	go st.receive()
	return st, nil
}

// enqueue queues c to be sent; false if the stream is broken.
func (st *callStream) enqueue(c *streamCall) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.broken != nil {
		return false
	}
	st.nextID++
	c.ID = st.nextID
	st.queue = append(st.queue, c)
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return true
}

// drop takes c out of the queue if it is not sent yet: its caller gave
// up on it.
func (st *callStream) drop(c *streamCall) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if i := slices.Index(st.queue, c); i >= 0 {
		st.queue = slices.Delete(st.queue, i, i+1)
	}
}

// send sends the queued calls, as many in a batch as MaxBatchBytes lets.
func (st *callStream) send() {
	var buf []byte
	for {
		select {
		case <-st.wake:
		case <-st.stopped:
			return
		}
		for {
			st.mu.Lock()
			if st.broken != nil || len(st.queue) == 0 {
				st.mu.Unlock()
				break
			}
			buf = NewStreamBatch(buf)
			n := 0
			for n < len(st.queue) && (n == 0 || len(buf)+len(st.queue[n].Request)+len(st.queue[n].Method)+32 <= MaxBatchBytes) {
				c := st.queue[n]
				buf = AppendStreamCall(buf, c.StreamCall)
				// Sent from here on: a message that fails may still have
				// reached the leader.
				c.sent = true
				st.pending[c.ID] = c
				n++
			}
			st.queue = append(st.queue[:0], st.queue[n:]...)
			st.mu.Unlock()
			if err := st.cs.SendMsg(&wrapperspb.BytesValue{Value: buf}); err != nil {
				if !errors.Is(err, io.EOF) {
					st.fail(err)
				}
				// io.EOF: the leader ended the stream, and receive gets
				// the status it ended it with, which says whether the
				// calls it did not answer ran (StreamDrained: none did).
				return
			}
		}
	}
}

// receive delivers the leader's answers.
func (st *callStream) receive() {
	for {
		var m wrapperspb.BytesValue
		if err := st.cs.RecvMsg(&m); err != nil {
			st.fail(err)
			return
		}
		answers, err := DecodeStreamAnswers(m.Value)
		if err != nil {
			st.fail(err)
			return
		}
		for _, a := range answers {
			st.mu.Lock()
			c, ok := st.pending[a.ID]
			delete(st.pending, a.ID)
			st.mu.Unlock()
			if ok {
				c.answer = a
				close(c.done)
			}
		}
	}
}

// fail breaks the stream: every call on it fails with err, and the next
// call opens a new stream.
func (st *callStream) fail(err error) {
	st.mu.Lock()
	if st.broken != nil {
		st.mu.Unlock()
		return
	}
	if err == nil {
		err = errors.New("route: the forwarding stream ended")
	}
	switch st := status.Convert(err); {
	case st.Code() == codes.Unimplemented:
		err = fmt.Errorf("%w: %w", errNoStream, err)
	case st.Code() == codes.Unavailable && st.Message() == drainedMsg:
		err = fmt.Errorf("%w: %w", errDrained, err)
	}
	st.broken = err
	calls := st.queue
	for _, c := range st.pending {
		calls = append(calls, c)
	}
	st.queue, st.pending = nil, nil
	close(st.stopped)
	st.mu.Unlock()
	st.f.mu.Lock()
	if st.f.streams[st.leader] == st {
		delete(st.f.streams, st.leader)
	}
	if errors.Is(err, errNoStream) && st.f.noStream != nil {
		st.f.noStream[st.leader] = st.addr
	}
	st.f.mu.Unlock()
	st.cancel()
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
}
