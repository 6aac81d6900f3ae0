package kvservice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
)

func newService(t *testing.T, l kvservice.Limits) (*kvservice.Service, *fakelog.Log, *[]time.Duration) {
	t.Helper()
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	var commits []time.Duration
	s, err := kvservice.New(kvservice.Config{Log: fl, State: fl.State, Limits: l, ObserveCommit: func(d time.Duration) { commits = append(commits, d) }})
	require.NoError(t, err)
	return s, fl, &commits
}

func put(t *testing.T, s *kvservice.Service, k, v string) (*pb.PutResponse, kvservice.Info) {
	t.Helper()
	resp, info, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte(k), Value: []byte(v), PrevKv: true})
	require.NoError(t, err)
	return resp, info
}

// Writes are log entries; each that changes something makes the next
// revision (etcd's: the first is 2), the log's own entries make none; the
// answers carry the stamps of the entries that made the revisions they
// name; reads answer at the revision of the state they read.
func TestWritesAndReads(t *testing.T) {
	s, fl, commits := newService(t, kvservice.Limits{})
	ctx := context.Background()

	first, info := put(t, s, "a", "1")
	assert.Equal(t, int64(2), first.Header.Revision)
	assert.Nil(t, first.PrevKv)
	assert.Equal(t, fakelog.StampAt(1), info.Stamp(2), "the write's own stamp: entry 1 made revision 2")
	fl.Skip(2) // the log's own entries make no revision
	second, info := put(t, s, "a", "2")
	assert.Equal(t, int64(3), second.Header.Revision)
	require.NotNil(t, second.PrevKv)
	assert.Equal(t, "1", string(second.PrevKv.Value))
	assert.Equal(t, fakelog.StampAt(1), info.Stamp(second.PrevKv.ModRevision), "the previous value's stamp")
	assert.Equal(t, fakelog.StampAt(4), info.Stamp(3))
	put(t, s, "b", "x") // entry 5, revision 4

	got, info, err := s.Range(ctx, edictlog.ReadLease, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c")})
	require.NoError(t, err)
	assert.Equal(t, int64(4), got.Header.Revision)
	require.Len(t, got.Kvs, 2)
	assert.Equal(t, int64(2), got.Kvs[0].Version)
	assert.Equal(t, int64(2), got.Kvs[0].CreateRevision)
	assert.Equal(t, edictlog.ReadLease, info.Level)
	assert.Equal(t, fakelog.StampAt(4), info.Stamp(3))
	assert.Equal(t, fakelog.StampAt(5), info.Stamp(4))
	bare, err := s.RangeUnstamped(ctx, edictlog.ReadLease, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c")})
	require.NoError(t, err)
	assert.Equal(t, got, bare, "the etcd API's read answers the same")

	old, info, err := s.Range(ctx, edictlog.ReadLease, &pb.RangeRequest{Key: []byte("a"), Revision: 2})
	require.NoError(t, err)
	assert.Equal(t, "1", string(old.Kvs[0].Value), "a read at a past revision")
	assert.Equal(t, int64(4), old.Header.Revision)
	assert.Equal(t, fakelog.StampAt(1), info.Stamp(2))

	del, info, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), PrevKv: true})
	require.NoError(t, err)
	assert.Equal(t, int64(2), del.Deleted)
	assert.Len(t, del.PrevKvs, 2)
	assert.Equal(t, int64(5), del.Header.Revision)
	assert.Equal(t, fakelog.StampAt(6), info.Stamp(5))

	txn, info, err := s.Txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("3")}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a")}}},
			{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
				Compare: []*pb.Compare{{Key: []byte("b"), RangeEnd: []byte("c"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}},
				Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b"), Value: []byte("n")}}}},
			}}},
		},
	})
	require.NoError(t, err)
	assert.True(t, txn.Succeeded)
	assert.Equal(t, int64(6), txn.Header.Revision, "one revision for the whole txn")
	read := txn.Responses[1].GetResponseRange()
	require.Len(t, read.Kvs, 1, "a range in a branch sees the branch's earlier writes")
	assert.Equal(t, txn.Header.Revision, read.Kvs[0].ModRevision)
	assert.True(t, txn.Responses[2].GetResponseTxn().Succeeded, "a nested txn")
	assert.Equal(t, fakelog.StampAt(7), info.Stamp(6))

	assert.Len(t, *commits, 5, "every write is observed once")
	assert.Len(t, fl.Applied(), 5)
}

// A read is served at the level asked, where that level allows; at a
// follower, a lease read is the router's to send to the leader.
func TestReadLevels(t *testing.T) {
	s, fl, _ := newService(t, kvservice.Limits{})
	put(t, s, "k", "v")
	ctx := context.Background()
	req := &pb.RangeRequest{Key: []byte("k")}

	_, info, err := s.Range(ctx, edictlog.ReadFollower, req)
	require.NoError(t, err)
	assert.Equal(t, edictlog.ReadLease, info.Level, "a follower read the leader answers is a lease read")

	fl.Follow(2)
	fl.SetStaleness(40 * time.Millisecond)
	_, err = rangeErr(s, edictlog.ReadLease, req)
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	assert.Equal(t, edict.ProcessID(2), nle.Leader)
	_, info, err = s.Range(ctx, edictlog.ReadFollower, req)
	require.NoError(t, err)
	assert.Equal(t, edictlog.ReadFollower, info.Level)
	assert.Zero(t, info.Staleness)
	resp, info, err := s.Range(ctx, edictlog.ReadStale, req)
	require.NoError(t, err)
	assert.Equal(t, edictlog.ReadStale, info.Level)
	assert.Equal(t, 40*time.Millisecond, info.Staleness)
	assert.Len(t, resp.Kvs, 1)

	fl.Follow(edict.None)
	_, err = rangeErr(s, edictlog.ReadFollower, req)
	require.ErrorAs(t, err, &nle)
	require.ErrorIs(t, err, kvservice.ErrNoLeader)

	// The etcd API's serializable read reads the state without asking
	// the log; its other reads ask it.
	fl.FailRead(errors.New("the log was asked"))
	bare, err := s.RangeUnstamped(ctx, edictlog.ReadStale, req)
	require.NoError(t, err)
	assert.Equal(t, resp, bare)
	_, err = s.ReadTxnUnstamped(ctx, edictlog.ReadStale, &pb.TxnRequest{})
	require.NoError(t, err)
	_, err = s.RangeUnstamped(ctx, edictlog.ReadFollower, req)
	require.ErrorContains(t, err, "the log was asked")
	_, err = s.ReadTxnUnstamped(ctx, edictlog.ReadFollower, &pb.TxnRequest{})
	require.ErrorContains(t, err, "the log was asked")
	_, err = rangeErr(s, edictlog.ReadStale, req)
	require.ErrorContains(t, err, "the log was asked", "the HTTP API's stale read asks it: it reports the staleness")
}

func rangeErr(s *kvservice.Service, level edictlog.ReadLevel, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, _, err := s.Range(context.Background(), level, r)
	return resp, err
}

// Reads at any revision from the compaction on; Compact refuses a
// revision compacted or not made yet, and with physical returns once the
// compacted revisions are removed.
func TestRangeAtRevisionAndCompact(t *testing.T) {
	s, _, _ := newService(t, kvservice.Limits{})
	for i := range 4 {
		put(t, s, "k", fmt.Sprint(i)) // revisions 2 to 5
	}
	ctx := context.Background()
	resp, err := s.Compact(ctx, &pb.CompactionRequest{Revision: 3, Physical: true})
	require.NoError(t, err)
	assert.Equal(t, int64(5), resp.Header.Revision)
	for _, c := range []struct {
		rev  int64
		want error
	}{{0, nil}, {3, nil}, {5, nil}, {1, kvservice.ErrCompacted}, {2, kvservice.ErrCompacted}, {6, kvservice.ErrFutureRev}, {1 << 40, kvservice.ErrFutureRev}} {
		t.Run(fmt.Sprint(c.rev), func(t *testing.T) {
			resp, err := rangeErr(s, edictlog.ReadLease, &pb.RangeRequest{Key: []byte("k"), Revision: c.rev})
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, int64(5), resp.Header.Revision)
				return
			}
			require.ErrorIs(t, err, c.want)
			var re *kvservice.RevisionError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, kvservice.RevisionError{Requested: c.rev, Oldest: 3, Current: 5, Err: c.want}, *re)
			assert.Contains(t, err.Error(), fmt.Sprint(c.rev))
		})
	}
	for _, c := range []struct {
		rev  int64
		want error
	}{{3, kvservice.ErrCompacted}, {2, kvservice.ErrCompacted}, {6, kvservice.ErrFutureRev}} {
		_, err := s.Compact(ctx, &pb.CompactionRequest{Revision: c.rev})
		require.ErrorIs(t, err, c.want, "compact at %d", c.rev)
	}
	_, err = s.Compact(ctx, &pb.CompactionRequest{Revision: -1})
	require.ErrorIs(t, err, kvservice.ErrInvalid)
}

// A request refused for what it holds reaches nothing: no log entry, no
// commit observed.
func TestRefusalsChangeNothing(t *testing.T) {
	s, fl, commits := newService(t, kvservice.Limits{MaxKeyBytes: 4, MaxValueBytes: 8, MaxTxnOps: 2, MaxRequestBytes: 64})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
		want error
	}{
		{"oversized key", func() error { _, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("kkkkk")}); return err }, kvservice.ErrKeyTooLarge},
		{"oversized value", func() error {
			_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 9)})
			return err
		}, kvservice.ErrValueTooLarge},
		{"oversized request", func() error {
			op := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 8)}}}
			op2 := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("j"), Value: make([]byte, 8)}}}
			cmp := &pb.Compare{Key: []byte("k"), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: make([]byte, 30)}}
			_, _, err := s.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmp}, Success: []*pb.RequestOp{op, op2}, Failure: []*pb.RequestOp{op, op2}})
			return err
		}, kvservice.ErrRequestTooLarge},
		{"empty key", func() error { _, _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{}); return err }, kvservice.ErrEmptyKey},
		{"lease", func() error { _, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Lease: 1}); return err }, kvservice.ErrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.call(), c.want)
			assert.Empty(t, fl.Applied())
			assert.Empty(t, *commits)
		})
	}
}

// The log's outcomes reach the caller as the taxonomy's; a refusal to
// route again stays a *edictlog.NotLeaderError; the caller leaving is the
// caller's own error.
func TestLogOutcomes(t *testing.T) {
	s, fl, commits := newService(t, kvservice.Limits{})
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		logErr error
		want   error
	}{
		{"outcome unknown", fmt.Errorf("%w: %w", edictlog.ErrOutcomeUnknown, context.DeadlineExceeded), kvservice.ErrTimeout},
		{"not committed", edictlog.ErrNotCommitted, kvservice.ErrLeaderChanged},
		{"shut down", edictlog.ErrShutdown, kvservice.ErrStopped},
		{"deadline", context.DeadlineExceeded, kvservice.ErrTimeout},
		{"caller left", context.Canceled, context.Canceled},
		{"not leader", &edictlog.NotLeaderError{Leader: 3, Err: edictlog.ErrNotLeader}, edictlog.ErrNotLeader},
		{"transfer", &edictlog.NotLeaderError{Leader: 1, Err: edictlog.ErrTransferring}, edictlog.ErrTransferring},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl.FailApply(c.logErr)
			_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k")})
			require.ErrorIs(t, err, c.want)
			fl.FailRead(c.logErr)
			_, err = rangeErr(s, edictlog.ReadLease, &pb.RangeRequest{Key: []byte("k")})
			require.ErrorIs(t, err, c.want)
			var nle *edictlog.NotLeaderError
			assert.Equal(t, errors.As(c.logErr, &nle), errors.As(err, &nle), "routed again exactly when the log says so")
		})
	}
	fl.FailApply(errors.New("disk on fire"))
	_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k")})
	require.ErrorContains(t, err, "disk on fire")
	assert.Empty(t, *commits, "no write succeeded")
}

// The state's refusals of a committed request change nothing and reach
// the caller as the taxonomy's.
func TestStateRefusals(t *testing.T) {
	s, fl, _ := newService(t, kvservice.Limits{})
	ctx := context.Background()
	// A branch that writes one key twice is refused before the log.
	op := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("d")}}}
	_, _, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{op, op}})
	require.ErrorIs(t, err, kvservice.ErrDuplicateKey)
	assert.Empty(t, fl.Applied())

	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("missing"), IgnoreValue: true})
	require.ErrorIs(t, err, kvservice.ErrKeyNotFound)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("k"), IgnoreValue: true, Value: []byte("v")})
	require.ErrorIs(t, err, kvservice.ErrInvalid, "etcd's value provided")

	put(t, s, "k", "v")
	resp, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k"), IgnoreValue: true, PrevKv: true})
	require.NoError(t, err)
	assert.Equal(t, "v", string(resp.PrevKv.Value))

	// NOSPACE: no puts, deletes go on.
	alarm, err := (&kvstate.Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NOSPACE}}).Encode()
	require.NoError(t, err)
	_, err = fl.Apply(ctx, alarm)
	require.NoError(t, err)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("w")})
	require.ErrorIs(t, err, kvservice.ErrNoSpace)
	del, _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), del.Deleted)
}

func TestLimitsDefaults(t *testing.T) {
	s, _, _ := newService(t, kvservice.Limits{})
	l := s.Limits()
	assert.Equal(t, 1<<10, l.MaxKeyBytes)
	assert.Equal(t, 1<<20, l.MaxValueBytes)
	assert.Equal(t, 128, l.MaxTxnOps)
	assert.Positive(t, l.MaxRequestBytes)
	big, _, _ := newService(t, kvservice.Limits{MaxKeyBytes: 1 << 30, MaxRequestBytes: 1 << 40})
	assert.Equal(t, 64<<10, big.Limits().MaxKeyBytes, "at most 64 KiB")
	assert.Equal(t, l.MaxRequestBytes, big.Limits().MaxRequestBytes)
	_, err := kvservice.New(kvservice.Config{})
	require.Error(t, err)
}

// barrierLog is a follower's log whose read barrier brings the entries
// the leader committed meanwhile: each Read first applies the commands
// queued in pending.
type barrierLog struct {
	*fakelog.Log
	pending [][]byte
	reads   []edictlog.ReadLevel
}

func (l *barrierLog) Read(ctx context.Context, level edictlog.ReadLevel, q []byte) (edictlog.ReadResult, error) {
	l.reads = append(l.reads, level)
	for _, cmd := range l.pending {
		if _, err := l.Log.Apply(ctx, cmd); err != nil {
			return edictlog.ReadResult{}, err
		}
	}
	l.pending = nil
	return l.Log.Read(ctx, level, q)
}

// AwaitRevision returns at once when the state is at the revision, asks
// for the follower read barrier when it is not, and says so when even
// that leaves the state before it.
func TestAwaitRevision(t *testing.T) {
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	bl := &barrierLog{Log: fl}
	s, err := kvservice.New(kvservice.Config{Log: bl, State: fl.State})
	require.NoError(t, err)
	ctx := context.Background()
	resp, _ := put(t, s, "k", "1")
	bl.reads = nil

	require.NoError(t, s.AwaitRevision(ctx, resp.Header.Revision))
	assert.Empty(t, bl.reads, "at the revision already: no barrier")

	cmd, err := (&kvstate.Request{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("2")}}).Encode()
	require.NoError(t, err)
	bl.pending = [][]byte{cmd}
	require.NoError(t, s.AwaitRevision(ctx, resp.Header.Revision+1))
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, bl.reads, "behind: the follower read barrier")
	got, err := s.RangeUnstamped(ctx, edictlog.ReadStale, &pb.RangeRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, "2", string(got.Kvs[0].Value), "a serializable read sees the write awaited")

	err = s.AwaitRevision(ctx, resp.Header.Revision+5)
	require.ErrorContains(t, err, "after the read barrier")
	fl.FailRead(kvservice.ErrTimeout)
	require.ErrorIs(t, s.AwaitRevision(ctx, resp.Header.Revision+5), kvservice.ErrTimeout)
}

// heldLog's read barrier waits until released, counting the barriers.
type heldLog struct {
	*fakelog.Log
	release chan struct{}
	reads   atomic.Int32
}

func (l *heldLog) Read(ctx context.Context, level edictlog.ReadLevel, q []byte) (edictlog.ReadResult, error) {
	l.reads.Add(1)
	select {
	case <-l.release:
	case <-ctx.Done():
		return edictlog.ReadResult{}, ctx.Err()
	}
	return l.Log.Read(ctx, level, q)
}

// Calls that wait while a barrier is in flight share it; a caller whose
// context ends stops waiting without ending the others' barrier.
func TestAwaitRevisionSharesTheBarrier(t *testing.T) {
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	hl := &heldLog{Log: fl, release: make(chan struct{})}
	s, err := kvservice.New(kvservice.Config{Log: hl, State: fl.State})
	require.NoError(t, err)
	resp, _ := put(t, s, "k", "1")
	behind := resp.Header.Revision + 1

	gone, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error)
	go func() { cancelled <- s.AwaitRevision(gone, behind) }()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.AwaitRevision(context.Background(), behind) }()
	}
	require.Eventually(t, func() bool { return hl.reads.Load() >= 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)

	// The write lands while the barrier is held; the barrier then shows it.
	cmd, err := (&kvstate.Request{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("2")}}).Encode()
	require.NoError(t, err)
	_, err = fl.Apply(context.Background(), cmd)
	require.NoError(t, err)
	close(hl.release)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}
	assert.Equal(t, int32(1), hl.reads.Load(), "one barrier for every caller")
}

// A write another process forwarded goes to the log as such, naming it;
// AwaitRevision waits for the state to get there without asking the log
// when it does within ApplyWait.
func TestForwardedWrites(t *testing.T) {
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	hl := &heldLog{Log: fl, release: make(chan struct{})}
	s, err := kvservice.New(kvservice.Config{Log: hl, State: fl.State, ApplyWait: time.Minute})
	require.NoError(t, err)
	ctx := context.Background()
	resp, _, err := s.Put(kvservice.ForwardedBy(ctx, 3), &pb.PutRequest{Key: []byte("k"), Value: []byte("1")})
	require.NoError(t, err)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("2")})
	require.NoError(t, err)
	assert.Equal(t, []edict.ProcessID{3}, fl.Forwarders(), "only the forwarded write names its forwarder")

	rev := resp.Header.Revision + 2
	done := make(chan error, 1)
	go func() { done <- s.AwaitRevision(ctx, rev) }()
	cmd, err := (&kvstate.Request{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("3")}}).Encode()
	require.NoError(t, err)
	_, err = fl.Apply(ctx, cmd)
	require.NoError(t, err)
	require.NoError(t, <-done)
	assert.Zero(t, hl.reads.Load(), "the state got there: no barrier")
}
