package kvstate

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/edict"
)

// ReadOnlyTxn reports whether every op of both of t's branches is a
// range, as etcd's isTxnReadonly: a txn that writes nothing, whichever
// branch its compares choose, and nests no txn. etcd's server answers one
// as a read, outside the log, and so does edictkv (ReadTxn).
func ReadOnlyTxn(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if op.GetRequestRange() == nil {
				return false
			}
		}
	}
	return true
}

// SerializableTxn reports whether every range of a read-only txn asks to
// be serializable, as etcd's isTxnSerializable: etcd answers one from the
// local state with no read barrier.
func SerializableTxn(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if r := op.GetRequestRange(); r == nil || !r.Serializable {
				return false
			}
		}
	}
	return true
}

// ReadTxn answers a txn that only reads (ReadOnlyTxn) from the applied
// state, as Range answers a range: its compares choose the branch and the
// branch's ranges read, all in one read view, so at one revision, which
// the header carries. Stamps holds the edict stamp of each kv's
// mod_revision, where known. It refuses a txn that writes or is malformed
// (ErrInvalid), a range at a revision the state cannot read at
// (ErrCompacted, ErrFutureRev), and every read while the CORRUPT alarm is
// active.
func (s *State) ReadTxn(ctx context.Context, t *pb.TxnRequest) (*pb.TxnResponse, map[int64]edict.Stamp, error) {
	return s.readTxn(ctx, t, true)
}

// ReadTxnUnstamped answers as ReadTxn does, without the stamps (see
// RangeUnstamped).
func (s *State) ReadTxnUnstamped(ctx context.Context, t *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, _, err := s.readTxn(ctx, t, false)
	return resp, err
}

func (s *State) readTxn(ctx context.Context, t *pb.TxnRequest, withStamps bool) (*pb.TxnResponse, map[int64]edict.Stamp, error) {
	if s.alarmed(pb.AlarmType_CORRUPT) {
		return nil, nil, ErrCorrupt
	}
	if !ReadOnlyTxn(t) {
		return nil, nil, fmt.Errorf("%w: a txn that writes is applied through the log", ErrInvalid)
	}
	if err := CheckTxn(t); err != nil {
		return nil, nil, err
	}
	tr, err := s.st.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("kvstate: read txn: %w", err)
	}
	defer tr.End()
	ok, err := applyCompares(ctx, tr, t.Compare)
	if err != nil {
		return nil, nil, err
	}
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	resp := &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: tr.Rev()}, Succeeded: ok, Responses: make([]*pb.ResponseOp, len(ops))}
	for i, op := range ops {
		r, err := executeRange(ctx, tr, op.GetRequestRange())
		if err != nil {
			return nil, nil, fmt.Errorf("txn range: %w", err)
		}
		resp.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: r}}
	}
	if !withStamps {
		return resp, nil, nil
	}
	// The view holds off compaction: every revision the answer names
	// still has its stamp record.
	st := stamps{}
	if err := st.collect(s.st, appendResponses(nil, resp.Responses)); err != nil {
		return nil, nil, err
	}
	return resp, st, nil
}
