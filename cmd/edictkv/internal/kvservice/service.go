// Package kvservice is edictkv's key-value service, independent of any
// API: Range at a revision and a consistency level, Put, DeleteRange, Txn
// and Compact, with etcd's request and response messages
// (go.etcd.io/etcd/api/v3/etcdserverpb) as its vocabulary, as etcd's own
// server (EtcdServer, the RaftKV interface) has them. They are plain data:
// nothing here knows gRPC or HTTP. The etcd API (internal/etcdapi) and the
// HTTP API (internal/httpapi) are adapters over it: they decode their
// requests into these messages, route calls that need the leader there
// (internal/route), and map the service's errors (errors.go) to their own
// answers.
//
// The service runs a call here. A write, or a lease read, at a process
// that does not lead returns the log's *log.NotLeaderError, having done
// nothing: the adapter's router then sends the call to the leader.
//
// What it guarantees:
//
//   - A request is checked whole before anything reaches the log: limits
//     (Limits), keys, options. A refused request changes nothing, and the
//     error wraps one of the package's sentinels.
//   - A write is one log entry, applied atomically at one revision; its
//     response's header carries that revision, and Info.Stamps its edict
//     stamp. A Txn's compares and the branch they choose are evaluated
//     and applied together.
//   - A read is served at the level asked for (log.ReadLevel: lease,
//     follower or stale) and its header carries the revision of the state
//     it was answered from. A read at a revision the state cannot answer
//     at is refused with a *RevisionError (ErrCompacted, ErrFutureRev).
//   - Info.Stamps holds the stamp of every revision the response names as
//     a key's mod_revision and, for a write, of the write's own revision:
//     the stamp of the entry that wrote it.
//
// Today the state is the kvfsm state machine (fsm/kvfsm): revisions are
// log indexes and there is no history, so a Range at a revision other
// than the current one is refused (ErrCompacted before it, ErrFutureRev
// after it), and Compact answers ErrUnsupported. Only this package's
// internals (convert.go) know kvfsm: the MVCC state replaces them, and the
// methods, their messages and the errors stay.
package kvservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// State is the replicated state the service runs on: a log whose entries
// a state machine applies (log.Node).
type State interface {
	// Apply replicates an encoded command and returns once the state
	// machine has applied it, with its answer (log.Node.Apply).
	Apply(ctx context.Context, cmd []byte) (log.ApplyResult, error)
	// Read answers an encoded query at level (log.Node.Read).
	Read(ctx context.Context, level log.ReadLevel, query []byte) (log.ReadResult, error)
}

// Limits bound what a client may send. They are the server's policy; the
// state machine's decoders have their own, larger, hard bounds.
type Limits struct {
	// MaxKeyBytes bounds keys and range ends: default 1 KiB, at most
	// kvfsm.MaxKeySize.
	MaxKeyBytes int
	// MaxValueBytes bounds a value: default 1 MiB.
	MaxValueBytes int
	// MaxTxnOps bounds the ops of one Txn branch, and its compares:
	// default 128, etcd's.
	MaxTxnOps int
	// MaxRequestBytes bounds a whole request (its encoded size): default,
	// and at most, what one log entry of the state machine can carry
	// with room for its framing.
	MaxRequestBytes int
}

// requestSlack is what a command's framing may add to its request's
// encoded size: a few bytes a field in msgpack as in protobuf.
const requestSlack = 1 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxKeyBytes <= 0 {
		l.MaxKeyBytes = 1 << 10
	}
	l.MaxKeyBytes = min(l.MaxKeyBytes, kvfsm.MaxKeySize)
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = 1 << 20
	}
	if l.MaxTxnOps <= 0 {
		l.MaxTxnOps = 128
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = kvfsm.MaxCommandSize - requestSlack
	}
	l.MaxRequestBytes = min(l.MaxRequestBytes, kvfsm.MaxCommandSize-requestSlack)
	return l
}

// MaxResponseBytes bounds an encoded response: the state machine refuses
// a read whose answer would be larger.
const MaxResponseBytes = kvfsm.MaxResultSize

// Config configures a Service.
type Config struct {
	State  State
	Limits Limits
	// Timeout bounds a write's commit and a read (default 10s); the
	// caller's context may end it sooner.
	Timeout time.Duration
	// ObserveCommit, if set, is told how long each write took from its
	// proposal to its apply here (at the leader): the latency a client
	// waits for, beyond the network.
	ObserveCommit func(time.Duration)
}

// Service is the KV service of one process. It is safe for concurrent
// use.
type Service struct {
	state   State
	limits  Limits
	timeout time.Duration
	observe func(time.Duration)
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.State == nil {
		return nil, errors.New("kvservice: Config.State is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	observe := cfg.ObserveCommit
	if observe == nil {
		observe = func(time.Duration) {}
	}
	return &Service{state: cfg.State, limits: cfg.Limits.withDefaults(), timeout: cfg.Timeout, observe: observe}, nil
}

// Limits are the limits the service enforces, defaults applied.
func (s *Service) Limits() Limits { return s.limits }

// Info is what the service knows of an answer beyond etcd's response.
type Info struct {
	// Level is how a read was served: a follower read answered by the
	// leader itself is served as a lease read.
	Level log.ReadLevel
	// Staleness bounds, for a stale read, how old the answer may be
	// (negative: no leader heard from since this process started).
	Staleness time.Duration
	// Stamps maps each revision the response names to the edict stamp of
	// the entry that made it: every key's mod_revision and, for a write,
	// the header's revision.
	Stamps map[int64]edict.Stamp
}

// Stamp is the stamp of revision rev; the zero stamp if the answer names
// no such revision.
func (i Info) Stamp(rev int64) edict.Stamp { return i.Stamps[rev] }

// Range reads a key or a range at level. Its header's revision is the
// state's revision the answer reflects; r.Revision, if set, must be one
// the state can answer at.
func (s *Service) Range(ctx context.Context, level log.ReadLevel, r *pb.RangeRequest) (*pb.RangeResponse, Info, error) {
	q, post, err := s.limits.rangeOf(r)
	if err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	query, err := kvfsm.EncodeQuery(q)
	if err != nil {
		return nil, Info{}, invalidf("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.state.Read(ctx, level, query)
	if err != nil {
		return nil, Info{}, s.failure("read", err)
	}
	out, err := kvfsm.DecodeResult(res.Data)
	if err != nil || out.Range == nil {
		return nil, Info{}, fmt.Errorf("kvservice: the state machine answered a range with %+v (%v)", out, err)
	}
	if err := checkRevision(r.Revision, out.Revision); err != nil {
		return nil, Info{}, err
	}
	var a answer
	resp := a.rangeResponse(&pb.ResponseHeader{Revision: int64(out.Revision)}, out.Range, post)
	info := Info{Level: res.Level, Stamps: a.stamps}
	if res.Level == log.ReadStale {
		info.Staleness = res.Staleness
	}
	return resp, info, nil
}

// checkRevision refuses a read at requested (0: the current revision)
// when the state, at current, cannot answer at it: it keeps no history.
func checkRevision(requested int64, current uint64) error {
	cur := int64(current)
	switch {
	case requested == 0 || requested == cur:
		return nil
	case requested > cur:
		return &RevisionError{Requested: requested, Oldest: cur, Current: cur, Err: ErrFutureRev}
	}
	return &RevisionError{Requested: requested, Oldest: cur, Current: cur, Err: ErrCompacted}
}

// Put writes one key.
func (s *Service) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, Info, error) {
	p, err := s.limits.putOf(r)
	if err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, kvfsm.Command{Put: p}, func(a *answer, h *pb.ResponseHeader, res *kvfsm.Result) (*pb.PutResponse, error) {
		if res.Put == nil {
			return nil, mismatch("put", res)
		}
		return a.putResponse(h, res.Put), nil
	})
}

// DeleteRange deletes a key or a range.
func (s *Service) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, Info, error) {
	d, err := s.limits.deleteOf(r)
	if err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, kvfsm.Command{Delete: d}, func(a *answer, h *pb.ResponseHeader, res *kvfsm.Result) (*pb.DeleteRangeResponse, error) {
		if res.Delete == nil {
			return nil, mismatch("delete", res)
		}
		return a.deleteResponse(h, res.Delete), nil
	})
}

// Txn runs a transaction as one log entry: its compares, and the branch
// they choose, are applied atomically at one revision. A Range in a branch
// sees the branch's earlier writes.
func (s *Service) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, Info, error) {
	t, post, err := s.limits.txnOf(r)
	if err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, kvfsm.Command{Txn: t}, func(a *answer, h *pb.ResponseHeader, res *kvfsm.Result) (*pb.TxnResponse, error) {
		if res.Txn == nil {
			return nil, mismatch("txn", res)
		}
		return a.txnResponse(h, res.Txn, post)
	})
}

// Compact would discard the history before r.Revision. The kvfsm state
// keeps none, so it is refused.
func (s *Service) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return nil, unsupportedf("Compact: edictkv keeps no history to compact (every revision but the current one is already gone)")
}

// size refuses a request whose encoding is over MaxRequestBytes.
func (s *Service) size(r interface{ Size() int }) error {
	if n := r.Size(); n > s.limits.MaxRequestBytes {
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrRequestTooLarge, n, s.limits.MaxRequestBytes)
	}
	return nil
}

// write commits cmd through the log and builds the answer from the state
// machine's result.
func write[T any](s *Service, ctx context.Context, cmd kvfsm.Command,
	build func(*answer, *pb.ResponseHeader, *kvfsm.Result) (T, error)) (T, Info, error) {
	var zero T
	data, err := kvfsm.EncodeCommand(cmd)
	if err != nil {
		return zero, Info{}, invalidf("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	res, err := s.state.Apply(ctx, data)
	if err != nil {
		return zero, Info{}, s.failure("write", err)
	}
	s.observe(time.Since(start))
	var out *kvfsm.Result
	switch r := res.Response.(type) {
	case *kvfsm.Result:
		out = r
	case error:
		// Committed, but refused by the state machine: nothing changed.
		if errors.Is(r, kvfsm.ErrDuplicateKey) {
			return zero, Info{}, fmt.Errorf("%w: %v", ErrDuplicateKey, r)
		}
		return zero, Info{}, invalidf("the state machine refused the command: %v", r)
	default:
		return zero, Info{}, fmt.Errorf("kvservice: unexpected state machine response %T", res.Response)
	}
	a := answer{}
	a.stamp(res.Index, res.Stamp)
	resp, err := build(&a, &pb.ResponseHeader{Revision: int64(out.Revision)}, out)
	if err != nil {
		return zero, Info{}, err
	}
	return resp, Info{Stamps: a.stamps}, nil
}

// failure words an error of the log. The log's outcomes pass as they are
// (they are the package's sentinels, or route again); the service's own
// deadline is a timeout; the caller's context ending is the caller's.
func (s *Service) failure(what string, err error) error {
	var nle *log.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return err
	case errors.Is(err, ErrTimeout), errors.Is(err, ErrLeaderChanged), errors.Is(err, ErrStopped):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: %w", what, ErrTimeout, err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, kvfsm.ErrInvalid):
		return invalidf("%s: %v", what, err)
	}
	return fmt.Errorf("kvservice: %s: %w", what, err)
}

func mismatch(what string, res *kvfsm.Result) error {
	return fmt.Errorf("kvservice: a %s answered with the wrong result %+v", what, res)
}
