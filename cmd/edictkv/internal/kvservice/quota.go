package kvservice

import (
	"context"
	"fmt"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// DefaultQuotaBytes is the space quota when none is given: etcd's
// (storage.DefaultQuotaBytes), 2 GiB.
const DefaultQuotaBytes = int64(2 << 30)

// Quota is etcd's space quota (--quota-backend-bytes, storage/quota.go
// and v3rpc/quota.go): before a Put, or a Txn that puts, is proposed, the
// state's backend size plus the request's cost must stay under the
// quota. Over it, the service proposes the NOSPACE alarm for this member,
// once, and refuses the write with ErrNoSpace; the state then refuses
// every put (kvstate's capped applier) until the alarm is deactivated —
// once a compaction and a defragmentation have made room, as with etcd.
type Quota struct {
	// Bytes is the quota: 0 means DefaultQuotaBytes; a negative value
	// turns the quota off, as etcd's.
	Bytes int64
	// Size reports the size of the state's backend, etcd's
	// backend.Size (mvcc.Store.Size): the file, free pages included, so
	// that a compaction alone gives nothing back until a defragmentation.
	// Without it there is no quota.
	Size func() int64
	// MemberID is the member the NOSPACE alarm names: this process.
	MemberID uint64
}

// The costs of etcd's quota (storage/quota.go): what a key's metadata is
// reckoned to take beside its key and value.
const kvOverhead = 256

// quota is a Service's Quota at work.
type quota struct {
	Quota
	// raising is set while an alarm activation is being proposed, so
	// that writes refused meanwhile do not propose another.
	raising atomic.Bool
}

func newQuota(q Quota) *quota {
	if q.Bytes == 0 {
		q.Bytes = DefaultQuotaBytes
	}
	return &quota{Quota: q}
}

func (q *quota) enabled() bool { return q.Bytes > 0 && q.Size != nil }

// costPut is etcd's costPut.
func costPut(r *pb.PutRequest) int64 { return int64(kvOverhead + len(r.Key) + len(r.Value)) }

// costTxn is etcd's costTxn: the dearer of the two branches, each the sum
// of its puts. Unlike etcd's, the puts of nested txns count too (the
// dearer branch of each), so that nesting does not get a put past the
// quota.
func costTxn(r *pb.TxnRequest) int64 {
	branch := func(ops []*pb.RequestOp) int64 {
		var n int64
		for _, op := range ops {
			switch {
			case op.GetRequestPut() != nil:
				n += costPut(op.GetRequestPut())
			case op.GetRequestTxn() != nil:
				n += costTxn(op.GetRequestTxn())
			}
		}
		return n
	}
	return max(branch(r.Success), branch(r.Failure))
}

// checkQuota is etcd's quotaAlarmer.check: a write of cost that would
// take the backend to the quota or over is refused with ErrNoSpace, after
// the NOSPACE alarm for this member is proposed (raiseNoSpace). A write
// that puts nothing (cost 0) always passes.
func (s *Service) checkQuota(ctx context.Context, cost int64) error {
	q := s.quota
	if cost == 0 || !q.enabled() {
		return nil
	}
	size := q.Size()
	if size+cost < q.Bytes {
		return nil
	}
	s.raiseNoSpace(ctx)
	return fmt.Errorf("%w: the database is %d bytes and the request's cost %d; the quota is %d bytes (--quota-backend-bytes): "+
		"compact, defragment, then deactivate the NOSPACE alarm", ErrNoSpace, size, cost, q.Bytes)
}

// raiseNoSpace proposes the NOSPACE alarm for this member unless it is
// active already or another write is proposing it. Its outcome does not
// change the refusal: a failed proposal is tried again by the next
// write over the quota.
func (s *Service) raiseNoSpace(ctx context.Context) {
	q := s.quota
	for _, a := range s.state.Alarms(pb.AlarmType_NOSPACE) {
		if a.MemberID == q.MemberID {
			return
		}
	}
	if !q.raising.CompareAndSwap(false, true) {
		return
	}
	defer q.raising.Store(false)
	_, _ = s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: q.MemberID, Alarm: pb.AlarmType_NOSPACE})
}

// QuotaBytes is the space quota in force: etcd's Status db_size_quota
// (the configured value, DefaultQuotaBytes for 0, negative when off).
func (s *Service) QuotaBytes() int64 { return s.quota.Bytes }
