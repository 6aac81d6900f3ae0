package kvservice

import (
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
)

// This file holds the checks the service makes before a request reaches
// the log: the server's limits (Limits) and etcd's API checks (v3rpc's
// checkRangeRequest, checkPutRequest, checkTxnRequest, checkIntervals).
// The state repeats etcd's checks at apply; making them here first means
// a refused request writes no log entry.

func (l Limits) key(what string, k []byte) error {
	switch {
	case len(k) == 0:
		return fmt.Errorf("%s: %w", what, ErrEmptyKey)
	case len(k) > l.MaxKeyBytes:
		return fmt.Errorf("%w: %s of %d bytes exceeds the limit of %d", ErrKeyTooLarge, what, len(k), l.MaxKeyBytes)
	}
	return nil
}

func (l Limits) rangeEnd(end []byte) error {
	if len(end) > l.MaxKeyBytes {
		return fmt.Errorf("%w: range_end of %d bytes exceeds the limit of %d", ErrKeyTooLarge, len(end), l.MaxKeyBytes)
	}
	return nil
}

func (l Limits) checkRange(r *pb.RangeRequest) error {
	if err := l.key("key", r.Key); err != nil {
		return err
	}
	if err := l.rangeEnd(r.RangeEnd); err != nil {
		return err
	}
	if r.Limit < 0 {
		return invalidf("negative limit %d", r.Limit)
	}
	for _, rev := range []int64{r.Revision, r.MinModRevision, r.MaxModRevision, r.MinCreateRevision, r.MaxCreateRevision} {
		if rev < 0 {
			return invalidf("negative revision %d", rev)
		}
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return invalidf("unknown sort order %d", r.SortOrder)
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return invalidf("unknown sort target %d", r.SortTarget)
	}
	return nil
}

func (l Limits) checkPut(r *pb.PutRequest) error {
	if err := l.key("key", r.Key); err != nil {
		return err
	}
	switch {
	case r.Lease != 0:
		// No lease is ever granted: etcd would answer "lease not found".
		return unsupportedf("leases: Put with lease %d", r.Lease)
	case r.IgnoreValue && len(r.Value) != 0:
		return invalidf("value is provided")
	case r.IgnoreLease && r.Lease != 0:
		return invalidf("lease is provided")
	case len(r.Value) > l.MaxValueBytes:
		return fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", ErrValueTooLarge, len(r.Value), l.MaxValueBytes)
	}
	return nil
}

func (l Limits) checkDelete(r *pb.DeleteRangeRequest) error {
	if err := l.key("key", r.Key); err != nil {
		return err
	}
	return l.rangeEnd(r.RangeEnd)
}

// checkTxn is etcd's checkTxnRequest with the server's limits: a nested
// txn shares the budget of ops with the txn around it, as in etcd.
func (l Limits) checkTxn(r *pb.TxnRequest) error {
	if err := l.checkTxnOps(r, l.MaxTxnOps, 0); err != nil {
		return err
	}
	if err := kvstate.CheckTxn(r); err != nil {
		if errors.Is(err, kvstate.ErrDuplicateKey) {
			return fmt.Errorf("%w: %v", ErrDuplicateKey, err)
		}
		return invalidf("%v", err)
	}
	return nil
}

func (l Limits) checkTxnOps(r *pb.TxnRequest, maxOps, depth int) error {
	if depth >= kvstate.MaxTxnDepth {
		return invalidf("txns nested deeper than %d", kvstate.MaxTxnDepth)
	}
	n := max(len(r.Compare), len(r.Success), len(r.Failure))
	if n > maxOps {
		return fmt.Errorf("%w: %d operations in one branch or compares, over the limit of %d", ErrTooManyOps, n, maxOps)
	}
	for i, c := range r.Compare {
		if err := l.checkCompare(c); err != nil {
			return at(fmt.Sprintf("compare %d", i), err)
		}
	}
	for _, branch := range []struct {
		name string
		ops  []*pb.RequestOp
	}{{"success", r.Success}, {"failure", r.Failure}} {
		for i, op := range branch.ops {
			var err error
			switch {
			case op.GetRequestRange() != nil:
				err = l.checkRange(op.GetRequestRange())
			case op.GetRequestPut() != nil:
				err = l.checkPut(op.GetRequestPut())
			case op.GetRequestDeleteRange() != nil:
				err = l.checkDelete(op.GetRequestDeleteRange())
			case op.GetRequestTxn() != nil:
				err = l.checkTxnOps(op.GetRequestTxn(), maxOps-n, depth+1)
			default:
				err = invalidf("empty request op")
			}
			if err != nil {
				return at(fmt.Sprintf("%s: op %d", branch.name, i), err)
			}
		}
	}
	return nil
}

func (l Limits) checkCompare(c *pb.Compare) error {
	if c == nil {
		return invalidf("empty compare")
	}
	if err := l.key("compare key", c.Key); err != nil {
		return err
	}
	if err := l.rangeEnd(c.RangeEnd); err != nil {
		return err
	}
	if _, ok := pb.Compare_CompareResult_name[int32(c.Result)]; !ok {
		return invalidf("unknown compare result %d", c.Result)
	}
	if _, ok := pb.Compare_CompareTarget_name[int32(c.Target)]; !ok {
		return invalidf("unknown compare target %d", c.Target)
	}
	return nil
}
