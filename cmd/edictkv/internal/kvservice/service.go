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
// that does not lead returns the log's *edictlog.NotLeaderError, having done
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
//   - A read — a Range, or a Txn whose every op is a range (ReadTxn) — is
//     served at the level asked for (edictlog.ReadLevel: lease, follower or
//     stale), writes no log entry, and its header carries the revision of
//     the state it was answered from. A read at a revision the state
//     cannot answer at is refused with a *RevisionError (ErrCompacted,
//     ErrFutureRev).
//   - A Put, or a Txn that puts, whose cost with the state's backend size
//     would reach the space quota (Quota, etcd's --quota-backend-bytes) is
//     refused with ErrNoSpace before it reaches the log, and the NOSPACE
//     alarm for this member is proposed, once while it is active. The
//     adapters run writes at the leader, so the leader's size decides.
//   - Info.Stamps holds the stamp of every revision the response names as
//     a key's mod_revision and, for a write, of the write's own revision:
//     the stamp of the entry that wrote it.
//
// The state is edictkv's replicated state (internal/kvstate) on the MVCC
// store: revisions are etcd's, a Range reads at any revision from the
// compaction revision on, Compact compacts (and waits for the removal
// with physical), and a write's header carries the state's revision after
// it. The log decides when a read may be answered (its read barrier,
// edictlog.Node.Read); the state answers it.
package kvservice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
)

// Log is the replicated log the service writes through (edictlog.Node).
type Log interface {
	// Apply replicates an encoded request and returns once the state has
	// applied it, with its *kvstate.Result (edictlog.Node.Apply).
	Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error)
	// ApplyForwarded is Apply for a write process from forwarded here,
	// which the log tells of the commit at once
	// (edictlog.Node.ApplyForwarded).
	ApplyForwarded(ctx context.Context, cmd []byte, from edict.ProcessID) (edictlog.ApplyResult, error)
	// Read returns once a read at level may be answered from this
	// process's state (edictlog.Node.Read with the empty query: the read
	// barrier).
	Read(ctx context.Context, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error)
}

// State is the replicated state the log applies to, as the service reads
// it (*kvstate.State).
type State interface {
	Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, map[int64]edict.Stamp, error)
	RangeUnstamped(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error)
	// ReadTxn answers a txn that only reads (kvstate.ReadOnlyTxn).
	ReadTxn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, map[int64]edict.Stamp, error)
	ReadTxnUnstamped(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error)
	// AwaitRev returns once the state is at revision rev or past it.
	AwaitRev(ctx context.Context, rev int64) error
	Rev() int64
	CompactRev() int64
	// Alarms are the active alarms of a type (NONE: all).
	Alarms(t pb.AlarmType) []*pb.AlarmMember
}

// Limits bound what a client may send. They are the server's policy; the
// state's decoder has its own, larger, hard bounds.
type Limits struct {
	// MaxKeyBytes bounds keys and range ends: default 1 KiB, at most
	// 64 KiB.
	MaxKeyBytes int
	// MaxValueBytes bounds a value: default 1 MiB.
	MaxValueBytes int
	// MaxTxnOps bounds the ops of one Txn branch, and its compares:
	// default 128, etcd's.
	MaxTxnOps int
	// MaxRequestBytes bounds a whole request (its encoded size): default,
	// and at most, what one log entry can carry with room for the
	// request's envelope.
	MaxRequestBytes int
}

// maxKeyBytes is the largest MaxKeyBytes.
const maxKeyBytes = 64 << 10

// requestSlack is what the request envelope may add to a request's
// encoded size.
const requestSlack = 4 << 10

func (l Limits) withDefaults() Limits {
	if l.MaxKeyBytes <= 0 {
		l.MaxKeyBytes = 1 << 10
	}
	l.MaxKeyBytes = min(l.MaxKeyBytes, maxKeyBytes)
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = 1 << 20
	}
	if l.MaxTxnOps <= 0 {
		l.MaxTxnOps = 128
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = kvstate.MaxRequestSize - requestSlack
	}
	l.MaxRequestBytes = min(l.MaxRequestBytes, kvstate.MaxRequestSize-requestSlack)
	return l
}

// Config configures a Service.
type Config struct {
	Log    Log
	State  State
	Limits Limits
	// Quota is the space quota (see Quota).
	Quota Quota
	// Timeout bounds a write's commit (default 10s); the caller's context
	// may end it sooner. A read is bounded by the caller's context and by
	// the log: edictlog's Node answers or fails a follower read's request
	// within a lease, and gives up waiting for a leader after its
	// Config.MaxLeaderWait. No timer runs per read: etcd's linearizable
	// reads are bounded by its read loop the same way, and its
	// serializable reads by the caller alone.
	Timeout time.Duration
	// ApplyWait is how long AwaitRevision waits for the leader's notice
	// of a commit before it asks the leader (zero: 10ms).
	ApplyWait time.Duration
	// ObserveCommit, if set, is told how long each write took from its
	// proposal to its apply here (at the leader): the latency a client
	// waits for, beyond the network.
	ObserveCommit func(time.Duration)
}

// Service is the KV service of one process. It is safe for concurrent
// use.
type Service struct {
	log       Log
	state     State
	nextID    atomic.Uint64
	limits    Limits
	quota     *quota
	timeout   time.Duration
	applyWait time.Duration
	observe   func(time.Duration)
	// barrier is the read barrier AwaitRevision has in flight, shared
	// by every call that waits meanwhile.
	barrierMu sync.Mutex
	barrier   *sharedBarrier
}

// sharedBarrier is one follower read barrier and its outcome, known once
// done is closed.
type sharedBarrier struct {
	done chan struct{}
	err  error
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Log == nil || cfg.State == nil {
		return nil, errors.New("kvservice: Config.Log and Config.State are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ApplyWait <= 0 {
		cfg.ApplyWait = 10 * time.Millisecond
	}
	observe := cfg.ObserveCommit
	if observe == nil {
		observe = func(time.Duration) {}
	}
	s := &Service{log: cfg.Log, state: cfg.State, limits: cfg.Limits.withDefaults(), quota: newQuota(cfg.Quota), timeout: cfg.Timeout, applyWait: cfg.ApplyWait, observe: observe}
	// Request ids tell one process's requests apart in traces; starting
	// from the clock keeps a restarted process's apart from before.
	s.nextID.Store(uint64(time.Now().UnixNano()))
	return s, nil
}

// Limits are the limits the service enforces, defaults applied.
func (s *Service) Limits() Limits { return s.limits }

// Info is what the service knows of an answer beyond etcd's response.
type Info struct {
	// Level is how a read was served: a follower read answered by the
	// leader itself is served as a lease read.
	Level edictlog.ReadLevel
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

// Range reads a key or a range at level: once the log's read barrier
// says the state may answer (edictlog.Node.Read), the state answers at
// r.Revision (0: its current revision), which must be one it keeps. The
// header's revision is the state's revision the answer reflects.
func (s *Service) Range(ctx context.Context, level edictlog.ReadLevel, r *pb.RangeRequest) (*pb.RangeResponse, Info, error) {
	if err := s.checkRange(r); err != nil {
		return nil, Info{}, err
	}
	return read(s, ctx, level, r.Revision, func(ctx context.Context) (*pb.RangeResponse, map[int64]edict.Stamp, error) {
		return s.state.Range(ctx, r)
	}, true)
}

// RangeUnstamped reads as Range does, and answers with neither stamps
// nor Info: the etcd API's read, whose response has a field for neither,
// leaves the stamp records unread. At the stale level it reads the state
// without asking the log, as etcd's serializable read reads its store:
// the log answers a stale read at once, from whatever is applied, and
// its answer would only say how stale the state may be.
func (s *Service) RangeUnstamped(ctx context.Context, level edictlog.ReadLevel, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := s.checkRange(r); err != nil {
		return nil, err
	}
	resp, _, err := read(s, ctx, level, r.Revision, func(ctx context.Context) (*pb.RangeResponse, map[int64]edict.Stamp, error) {
		resp, err := s.state.RangeUnstamped(ctx, r)
		return resp, nil, err
	}, level != edictlog.ReadStale)
	return resp, err
}

func (s *Service) checkRange(r *pb.RangeRequest) error {
	if err := s.limits.checkRange(r); err != nil {
		return err
	}
	return s.size(r)
}

// ReadTxn answers a Txn that only reads — every op of both branches a
// range, none nested (ReadOnlyTxn) — at level, as Range answers: once the
// log's read barrier says the state may, from the state, with no log
// entry: its compares and ranges at one revision, the header's. etcd's
// server answers such a txn the same way. Txn answers it too, through the
// log.
func (s *Service) ReadTxn(ctx context.Context, level edictlog.ReadLevel, r *pb.TxnRequest) (*pb.TxnResponse, Info, error) {
	if err := s.checkReadTxn(r); err != nil {
		return nil, Info{}, err
	}
	return read(s, ctx, level, 0, func(ctx context.Context) (*pb.TxnResponse, map[int64]edict.Stamp, error) {
		return s.state.ReadTxn(ctx, r)
	}, true)
}

// ReadTxnUnstamped answers as ReadTxn does, with neither stamps nor
// Info, and at the stale level without asking the log (see
// RangeUnstamped).
func (s *Service) ReadTxnUnstamped(ctx context.Context, level edictlog.ReadLevel, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := s.checkReadTxn(r); err != nil {
		return nil, err
	}
	resp, _, err := read(s, ctx, level, 0, func(ctx context.Context) (*pb.TxnResponse, map[int64]edict.Stamp, error) {
		resp, err := s.state.ReadTxnUnstamped(ctx, r)
		return resp, nil, err
	}, level != edictlog.ReadStale)
	return resp, err
}

func (s *Service) checkReadTxn(r *pb.TxnRequest) error {
	if !ReadOnlyTxn(r) {
		return invalidf("a txn that writes is not a read: use Txn")
	}
	if err := s.limits.checkTxn(r); err != nil {
		return err
	}
	return s.size(r)
}

// ReadOnlyTxn reports whether every op of both of r's branches is a
// range (etcd's isTxnReadonly): a txn ReadTxn answers.
func ReadOnlyTxn(r *pb.TxnRequest) bool { return kvstate.ReadOnlyTxn(r) }

// SerializableTxn reports whether every range of a read-only txn is
// serializable (etcd's isTxnSerializable): a txn etcd answers from the
// local state, at the stale level.
func SerializableTxn(r *pb.TxnRequest) bool { return kvstate.SerializableTxn(r) }

// read answers a read at level: the log's read barrier first (unless
// barrier is false, for a stale read that needs nothing of it), then the
// state. rev is the revision the request names, for a refusal's
// RevisionError.
func read[T interface{ Size() int }](s *Service, ctx context.Context, level edictlog.ReadLevel, rev int64,
	answer func(context.Context) (T, map[int64]edict.Stamp, error), barrier bool) (T, Info, error) {
	var zero T
	info := Info{Level: level}
	if barrier {
		res, err := s.log.Read(ctx, level, nil)
		if err != nil {
			return zero, Info{}, s.failure("read", err)
		}
		info.Level = res.Level
		if res.Level == edictlog.ReadStale {
			info.Staleness = res.Staleness
		}
	}
	resp, stamps, err := answer(ctx)
	if err != nil {
		return zero, Info{}, s.refusal("read", rev, err)
	}
	if n := resp.Size(); n > MaxResponseBytes {
		return zero, Info{}, fmt.Errorf("%w: the answer of %d bytes is over the limit of %d: ask for fewer keys (limit)", ErrRequestTooLarge, n, MaxResponseBytes)
	}
	info.Stamps = stamps
	return resp, info, nil
}

// MaxResponseBytes bounds an encoded Range response: gRPC's largest
// message, less room for its framing.
const MaxResponseBytes = 256<<20 - 4<<10

// Put writes one key.
func (s *Service) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, Info, error) {
	if err := s.limits.checkPut(r); err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	if err := s.checkQuota(ctx, costPut(r)); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, &kvstate.Request{Put: r}, 0, func(res *kvstate.Result) (*pb.PutResponse, bool) { return res.Put, res.Put != nil })
}

// DeleteRange deletes a key or a range.
func (s *Service) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, Info, error) {
	if err := s.limits.checkDelete(r); err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, &kvstate.Request{DeleteRange: r}, 0, func(res *kvstate.Result) (*pb.DeleteRangeResponse, bool) {
		return res.DeleteRange, res.DeleteRange != nil
	})
}

// Txn runs a transaction as one log entry, with etcd's semantics: its
// compares (over a key or a range), and those of the nested txns on the
// path they choose, are evaluated against the state before it; the
// path's requests then apply at one revision, each range seeing the
// writes before it.
func (s *Service) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, Info, error) {
	if err := s.limits.checkTxn(r); err != nil {
		return nil, Info{}, err
	}
	if err := s.size(r); err != nil {
		return nil, Info{}, err
	}
	if err := s.checkQuota(ctx, costTxn(r)); err != nil {
		return nil, Info{}, err
	}
	return write(s, ctx, &kvstate.Request{Txn: r}, 0, func(res *kvstate.Result) (*pb.TxnResponse, bool) { return res.Txn, res.Txn != nil })
}

// Compact discards the history before r.Revision, as etcd's: reads below
// it fail with ErrCompacted from then on. With r.Physical it returns only
// once the compacted revisions are removed from the store (the state's
// background compactor removes them in steps); the caller's context
// bounds that wait, and the service's Timeout does not.
func (s *Service) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	if r.Revision < 0 {
		return nil, invalidf("negative revision %d", r.Revision)
	}
	var physical <-chan struct{}
	resp, _, err := write(s, ctx, &kvstate.Request{Compaction: r}, r.Revision, func(res *kvstate.Result) (*pb.CompactionResponse, bool) {
		physical = res.Physical
		return res.Compaction, res.Compaction != nil
	})
	if err != nil {
		return nil, err
	}
	if r.Physical && physical != nil {
		select {
		case <-physical:
		case <-ctx.Done():
			return nil, s.failure("compaction", fmt.Errorf("%w: waiting for the physical compaction: %w", ErrTimeout, ctx.Err()))
		}
	}
	return resp, nil
}

// Alarm is etcd's Maintenance.Alarm: it lists (GET), activates or
// deactivates alarms through the log, as etcd does, so that the answer
// reflects every alarm change committed before it. An active NOSPACE
// alarm refuses Puts and Txns with puts (ErrNoSpace) until it is
// deactivated; CORRUPT refuses every KV request (ErrCorrupt).
func (s *Service) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if _, ok := pb.AlarmRequest_AlarmAction_name[int32(r.Action)]; !ok {
		return nil, invalidf("unknown alarm action %d", r.Action)
	}
	if _, ok := pb.AlarmType_name[int32(r.Alarm)]; !ok {
		return nil, invalidf("unknown alarm type %d", r.Alarm)
	}
	resp, _, err := write(s, ctx, &kvstate.Request{Alarm: r}, 0, func(res *kvstate.Result) (*pb.AlarmResponse, bool) {
		if res.Alarm != nil {
			res.Alarm.Header = &pb.ResponseHeader{Revision: res.Rev}
		}
		return res.Alarm, res.Alarm != nil
	})
	return resp, err
}

// AwaitRevision returns once this process's state is at revision rev or
// past it, as etcd's member answers a write it proposed only once it has
// applied it there itself: a write answered through a follower is then
// seen by a serializable read at that follower. At once if the state is;
// else once it gets there, the leader having told this process of the
// commit at once (ForwardedBy); and if that takes over Config.ApplyWait
// (the notice lost), after the log's read barrier at the follower level,
// whose index — the leader's commit index, which the leader then tells
// this process as soon as its log holds it — covers every write the
// leader has answered. An error says the state is not there yet, not that
// the write failed.
func (s *Service) AwaitRevision(ctx context.Context, rev int64) error {
	if s.state.Rev() >= rev {
		return nil
	}
	// The leader tells this process of the commit at once (ForwardedBy):
	// it is usually here with the leader's answer, or soon after.
	wctx, cancel := context.WithTimeout(ctx, s.applyWait)
	err := s.state.AwaitRev(wctx, rev)
	cancel()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return s.failure("waiting to apply revision "+strconv.FormatInt(rev, 10), ctx.Err())
	}
	// A barrier in flight is shared: under load most forwarded writes
	// find their follower a little behind, and one barrier at a time
	// serves them all. One that began before this write committed may
	// return short of it: then the next one covers it.
	for range 2 {
		if s.state.Rev() >= rev {
			return nil
		}
		s.barrierMu.Lock()
		b, mine := s.barrier, false
		if b == nil {
			b, mine = &sharedBarrier{done: make(chan struct{})}, true
			s.barrier = b
		}
		s.barrierMu.Unlock()
		if mine {
			// Not bound to this caller's context: the others share it.
			go func() {
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
				_, b.err = s.log.Read(bctx, edictlog.ReadFollower, nil)
				cancel()
				s.barrierMu.Lock()
				s.barrier = nil
				s.barrierMu.Unlock()
				close(b.done)
			}()
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return s.failure("waiting to apply revision "+strconv.FormatInt(rev, 10), ctx.Err())
		}
		if b.err != nil {
			return s.failure("waiting to apply revision "+strconv.FormatInt(rev, 10), b.err)
		}
	}
	if now := s.state.Rev(); now < rev {
		return fmt.Errorf("kvservice: the state is at revision %d after the read barrier, before %d", now, rev)
	}
	return nil
}

// Rev is the state's current revision here: the header revision of an
// answer that reads no key.
func (s *Service) Rev() int64 { return s.state.Rev() }

// Alarms are the alarms active in the state applied here (every type),
// as etcd's Status lists them.
func (s *Service) Alarms() []*pb.AlarmMember { return s.state.Alarms(pb.AlarmType_NONE) }

// size refuses a request whose encoding is over MaxRequestBytes.
func (s *Service) size(r interface{ Size() int }) error {
	if n := r.Size(); n > s.limits.MaxRequestBytes {
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrRequestTooLarge, n, s.limits.MaxRequestBytes)
	}
	return nil
}

// write commits req through the log and takes its response from the
// state's Result. rev is the revision the request names, for a refusal's
// RevisionError.
func write[T any](s *Service, ctx context.Context, req *kvstate.Request, rev int64, response func(*kvstate.Result) (T, bool)) (T, Info, error) {
	var zero T
	req.ID = s.nextID.Add(1)
	data, err := req.Encode()
	if err != nil {
		return zero, Info{}, invalidf("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	var res edictlog.ApplyResult
	if from := forwarder(ctx); from != edict.None {
		res, err = s.log.ApplyForwarded(ctx, data, from)
	} else {
		res, err = s.log.Apply(ctx, data)
	}
	if err != nil {
		return zero, Info{}, s.failure("write", err)
	}
	s.observe(time.Since(start))
	out, ok := res.Response.(*kvstate.Result)
	if !ok {
		return zero, Info{}, fmt.Errorf("kvservice: unexpected state machine response %T", res.Response)
	}
	if out.Err != nil {
		// Committed, but refused by the state: nothing changed.
		return zero, Info{}, s.refusal("write", rev, out.Err)
	}
	resp, ok := response(out)
	if !ok {
		return zero, Info{}, fmt.Errorf("kvservice: the state answered %v request %d with no response", req.Kind(), out.Index)
	}
	return resp, Info{Stamps: out.Stamps}, nil
}

// refusal words the state's refusal of a request in the package's
// taxonomy.
func (s *Service) refusal(what string, rev int64, err error) error {
	var re error
	switch {
	case errors.Is(err, kvstate.ErrCompacted):
		re = ErrCompacted
	case errors.Is(err, kvstate.ErrFutureRev):
		re = ErrFutureRev
	}
	if re != nil {
		cur, oldest := s.state.Rev(), max(s.state.CompactRev(), 1)
		return &RevisionError{Requested: rev, Oldest: oldest, Current: cur, Err: re}
	}
	for _, m := range []struct{ from, to error }{
		{kvstate.ErrKeyNotFound, ErrKeyNotFound},
		{kvstate.ErrNoSpace, ErrNoSpace},
		{kvstate.ErrCorrupt, ErrCorrupt},
		{kvstate.ErrDuplicateKey, ErrDuplicateKey},
	} {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%s: %w", what, m.to)
		}
	}
	if errors.Is(err, kvstate.ErrInvalid) || errors.Is(err, kvstate.ErrBadRequest) {
		return invalidf("%s: the state refused the request: %v", what, err)
	}
	return fmt.Errorf("kvservice: %s: %w", what, err)
}

// failure words an error of the log. The log's outcomes pass as they are
// (they are the package's sentinels, or route again); the service's own
// deadline is a timeout; the caller's context ending is the caller's.
func (s *Service) failure(what string, err error) error {
	var nle *edictlog.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return err
	case errors.Is(err, ErrTimeout), errors.Is(err, ErrLeaderChanged), errors.Is(err, ErrStopped):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: %w", what, ErrTimeout, err)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("kvservice: %s: %w", what, err)
}

// forwardedByKey is the context key of ForwardedBy.
type forwardedByKey struct{}

// ForwardedBy returns ctx for a write that process from forwarded here:
// the log then tells from of its commit at once (Log.ApplyForwarded),
// since from answers its client only once it has applied the write too
// (AwaitRevision).
func ForwardedBy(ctx context.Context, from edict.ProcessID) context.Context {
	return context.WithValue(ctx, forwardedByKey{}, from)
}

// forwarder is the process ForwardedBy named in ctx, or edict.None.
func forwarder(ctx context.Context) edict.ProcessID {
	from, _ := ctx.Value(forwardedByKey{}).(edict.ProcessID)
	return from
}
