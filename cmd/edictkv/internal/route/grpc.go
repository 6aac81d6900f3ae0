package route

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// A forwarded gRPC call carries forwardedBy in its metadata. A process
// that receives one but does not lead answers MisdirectedGRPC instead of
// forwarding again; the forwarder recognizes that answer and looks for the
// leader again.
const (
	forwardedBy    = "edictkv-forwarded-by"
	misdirectedMsg = "edictkv: forwarded to a process that does not lead"
)

// MisdirectedGRPC is the answer to a forwarded gRPC call that reached a
// process that does not lead.
var MisdirectedGRPC = status.Error(codes.Unavailable, misdirectedMsg)

// ForwardedGRPC reports whether another process forwarded the call of ctx
// here.
func ForwardedGRPC(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, forwardedBy)) > 0
}

// ForwarderGRPC is the process that forwarded the call of ctx here, as
// its metadata names it; edict.None if none did, or if the name is not a
// process id.
func ForwarderGRPC(ctx context.Context) edict.ProcessID {
	v := metadata.ValueFromIncomingContext(ctx, forwardedBy)
	if len(v) == 0 {
		return edict.None
	}
	id, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return edict.None
	}
	return edict.ProcessID(id)
}

// GRPCForwarder sends unary gRPC calls on to the leader, by full method
// name, over one connection per process kept open between calls. It is
// safe for concurrent use; Close it when done.
type GRPCForwarder struct {
	self edict.ProcessID
	addr func(edict.ProcessID) string
	opts []grpc.DialOption

	mu    sync.Mutex
	conns map[edict.ProcessID]*peerConn
	// streams are the forwarding streams, by leader (stream.go);
	// opening is held while one opens.
	streams map[edict.ProcessID]*callStream
	opening sync.Mutex
	// noStream holds the address of each leader found to serve no
	// forwarding stream, whose calls are then forwarded one by one.
	noStream map[edict.ProcessID]string
}

type peerConn struct {
	addr string
	conn *grpc.ClientConn
}

// NewGRPCForwarder returns a forwarder that marks calls as sent by self
// and finds each process's gRPC address with addr ("" if unknown). opts
// are added to every connection's dial options (plain TCP: the API has no
// TLS).
func NewGRPCForwarder(self edict.ProcessID, addr func(edict.ProcessID) string, opts ...grpc.DialOption) *GRPCForwarder {
	return &GRPCForwarder{self: self, addr: addr, opts: opts, conns: map[edict.ProcessID]*peerConn{},
		streams: map[edict.ProcessID]*callStream{}, noStream: map[edict.ProcessID]string{}}
}

// conn returns a connection to leader's current address.
func (f *GRPCForwarder) conn(leader edict.ProcessID) (*grpc.ClientConn, error) {
	addr := f.addr(leader)
	if addr == "" {
		return nil, ErrNoAddress
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return nil, errors.New("route: the gRPC forwarder is closed")
	}
	if p, ok := f.conns[leader]; ok {
		if p.addr == addr {
			return p.conn, nil
		}
		_ = p.conn.Close() // the process moved: its stream breaks too
		delete(f.conns, leader)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, f.opts...)
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("route: connect to %s: %w", addr, err)
	}
	f.conns[leader] = &peerConn{addr: addr, conn: c}
	return c, nil
}

// Invoke calls method (a full gRPC method name, "/etcdserverpb.KV/Put")
// at leader with req, and fills reply with the answer. It returns nil, or
// the leader's own error answer (a gRPC status), or:
//
//   - a *edictlog.NotLeaderError naming leader when the call is worth another
//     look: leader's address is not known, its connection is down (the
//     call is then not sent), it answered MisdirectedGRPC, or, for a read
//     (write false), the call failed in transport;
//   - an error wrapping edictlog.ErrOutcomeUnknown for a write whose call
//     failed in transport after it was sent: it is not sent again;
//   - ctx's error (as a gRPC status) when ctx ended.
func (f *GRPCForwarder) Invoke(ctx context.Context, leader edict.ProcessID, method string, req, reply any, write bool) error {
	c, err := f.conn(leader)
	if err != nil {
		return &edictlog.NotLeaderError{Leader: leader, Err: err}
	}
	if c.GetState() == connectivity.TransientFailure {
		// Not sent: gRPC fails such calls at once. Look again when the
		// connection is back or the leader changed.
		c.Connect()
		return &edictlog.NotLeaderError{Leader: leader, Err: ErrUnreachable}
	}
	fctx := metadata.AppendToOutgoingContext(ctx, forwardedBy, strconv.FormatUint(uint64(f.self), 10))
	err = c.Invoke(fctx, method, req, reply)
	if err == nil {
		return nil
	}
	if done := ctx.Err(); done != nil {
		return status.FromContextError(done).Err()
	}
	ans := status.Convert(err)
	switch {
	case ans.Code() == codes.Unavailable && ans.Message() == misdirectedMsg:
		return &edictlog.NotLeaderError{Leader: leader, Err: ErrMoved}
	case fromServer(ans):
		return err // the leader's own answer
	case write:
		return fmt.Errorf("%w: forwarding %s to the leader (process %d) failed after it was sent: %w",
			edictlog.ErrOutcomeUnknown, method, leader, err)
	}
	// A read is safe to send again.
	return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
}

// fromServer tells an answer written by an edictkv handler from one gRPC
// made up when the connection failed: edictkv's Unavailable answers are
// etcd's ("etcdserver: ...") or its own ("edictkv..."), and it never
// answers Canceled, DeadlineExceeded or Unknown itself.
func fromServer(st *status.Status) bool {
	if st.Code() != codes.Unavailable {
		return st.Code() != codes.Canceled && st.Code() != codes.DeadlineExceeded && st.Code() != codes.Unknown
	}
	m := st.Message()
	return strings.HasPrefix(m, "etcdserver: ") || strings.HasPrefix(m, "edictkv")
}

// Close closes the connections; later calls are refused (and routed
// again, to no avail, until their wait ends).
func (f *GRPCForwarder) Close() error {
	f.mu.Lock()
	conns, streams := f.conns, f.streams
	f.conns, f.streams = nil, nil
	f.mu.Unlock()
	for _, st := range streams {
		st.fail(errors.New("route: the gRPC forwarder is closed"))
	}
	var errs []error
	for _, p := range conns {
		errs = append(errs, p.conn.Close())
	}
	return errors.Join(errs...)
}
