package kvstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
)

// This file is etcd's server/etcdserver/txn: Put, DeleteRange, Range and
// Txn over a store's transaction, with etcd's checks and answers.

// reader is what a range reads through: a read view, or a write
// transaction that sees its own changes.
type rangeReader interface {
	Range(ctx context.Context, key, end []byte, o mvcc.RangeOptions) (*mvcc.RangeResult, error)
}

// executeRange is etcd's executeRange: the store applies every option
// while walking its index; the header carries the revision read from.
func executeRange(ctx context.Context, rd rangeReader, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	rr, err := rd.Range(ctx, r.Key, r.RangeEnd, mvcc.RangeOptions{
		Rev: r.Revision, Limit: r.Limit, CountOnly: r.CountOnly, KeysOnly: r.KeysOnly,
		SortOrder: r.SortOrder, SortTarget: r.SortTarget,
		MinModRevision: r.MinModRevision, MaxModRevision: r.MaxModRevision,
		MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision,
	})
	if err != nil {
		return nil, err
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: rr.Rev}, Kvs: rr.KVs, More: rr.More, Count: rr.Count}, nil
}

// checkPutRequest is etcd's API check of a put (v3rpc), repeated here so
// that an entry no server checked changes nothing it should not.
func checkPutRequest(r *pb.PutRequest) error {
	switch {
	case len(r.Key) == 0:
		return fmt.Errorf("%w: put of the empty key", ErrInvalid)
	case r.IgnoreValue && len(r.Value) != 0:
		return fmt.Errorf("%w: value is provided with ignore_value", ErrInvalid)
	case r.IgnoreLease && r.Lease != 0:
		return fmt.Errorf("%w: lease is provided with ignore_lease", ErrInvalid)
	}
	return nil
}

func put(tw *mvcc.TxnWrite, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := checkPutRequest(r); err != nil {
		return nil, err
	}
	return putIn(tw, r)
}

// putIn is etcd's put: the previous pair read through the transaction.
func putIn(tw *mvcc.TxnWrite, r *pb.PutRequest) (*pb.PutResponse, error) {
	pr, err := tw.Put(r.Key, r.Value, r.Lease, mvcc.PutOptions{PrevKV: r.PrevKv, IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease})
	if err != nil {
		return nil, err
	}
	return &pb.PutResponse{Header: &pb.ResponseHeader{Revision: pr.Rev}, PrevKv: pr.PrevKV}, nil
}

func deleteRange(ctx context.Context, tw *mvcc.TxnWrite, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if len(r.Key) == 0 {
		return nil, fmt.Errorf("%w: delete of the empty key", ErrInvalid)
	}
	return deleteIn(ctx, tw, r)
}

func deleteIn(ctx context.Context, tw *mvcc.TxnWrite, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	dr, err := tw.DeleteRange(ctx, r.Key, r.RangeEnd, r.PrevKv)
	if err != nil {
		return nil, err
	}
	return &pb.DeleteRangeResponse{Header: &pb.ResponseHeader{Revision: dr.Rev}, Deleted: dr.Deleted, PrevKvs: dr.PrevKVs}, nil
}

// applyTxn is etcd's Txn: the compares choose a path through the txn and
// its nested txns, all against the state before the txn; the path's
// requests are checked against that state too (ranges at a revision,
// puts that keep a value or lease); only then does anything change, in
// order, one revision for the whole txn, each range seeing the writes
// before it.
func applyTxn(ctx context.Context, tw *mvcc.TxnWrite, t *pb.TxnRequest, compactRev int64) (*pb.TxnResponse, error) {
	if err := CheckTxn(t); err != nil {
		return nil, err
	}
	path, err := compareToPath(ctx, tw, t)
	if err != nil {
		return nil, err
	}
	if _, err := checkTxn(ctx, tw, t, path, compactRev); err != nil {
		return nil, err
	}
	resp := &pb.TxnResponse{}
	if _, err := executeTxn(ctx, tw, t, path, resp); err != nil {
		if tw.Changes() > 0 {
			// Checked above: only a failing store gets here.
			return nil, fmt.Errorf("kvstate: txn failed after its first write: %w", err)
		}
		return nil, err
	}
	rev := tw.Rev()
	if tw.Changes() > 0 {
		rev++
	}
	resp.Header = &pb.ResponseHeader{Revision: rev}
	return resp, nil
}

// compareToPath evaluates the compares of t and of the nested txns on the
// path they choose, depth first, as etcd's compareToPath.
func compareToPath(ctx context.Context, rd rangeReader, t *pb.TxnRequest) ([]bool, error) {
	ok, err := applyCompares(ctx, rd, t.Compare)
	if err != nil {
		return nil, err
	}
	path := []bool{ok}
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	for _, op := range ops {
		if nt := op.GetRequestTxn(); nt != nil {
			sub, err := compareToPath(ctx, rd, nt)
			if err != nil {
				return nil, err
			}
			path = append(path, sub...)
		}
	}
	return path, nil
}

func applyCompares(ctx context.Context, rd rangeReader, cs []*pb.Compare) (bool, error) {
	for _, c := range cs {
		ok, err := applyCompare(ctx, rd, c)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// applyCompare is etcd's: every key in the compare's range must satisfy
// it; with none, a VALUE compare fails and the others compare a zero
// pair.
func applyCompare(ctx context.Context, rd rangeReader, c *pb.Compare) (bool, error) {
	if c == nil {
		return true, nil
	}
	rr, err := rd.Range(ctx, c.Key, c.RangeEnd, mvcc.RangeOptions{})
	if err != nil {
		if errors.Is(err, mvcc.ErrCompacted) || errors.Is(err, mvcc.ErrFutureRev) {
			return false, nil
		}
		return false, err
	}
	if len(rr.KVs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false, nil
		}
		return compareKV(c, &mvccpb.KeyValue{}), nil
	}
	for _, kv := range rr.KVs {
		if !compareKV(c, kv) {
			return false, nil
		}
	}
	return true, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var result int
	switch c.Target {
	case pb.Compare_VALUE:
		result = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		result = compareInt64(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		result = compareInt64(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		result = compareInt64(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		result = compareInt64(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return result == 0
	case pb.Compare_NOT_EQUAL:
		return result != 0
	case pb.Compare_GREATER:
		return result > 0
	case pb.Compare_LESS:
		return result < 0
	}
	return true
}

// checkTxn is etcd's: on the chosen path, a range at a revision the state
// cannot read at, or a put that keeps the value or lease of a key that
// does not exist, refuses the whole txn before anything changes.
func checkTxn(ctx context.Context, tw *mvcc.TxnWrite, t *pb.TxnRequest, path []bool, compactRev int64) (int, error) {
	txns := 0
	ops := t.Success
	if !path[0] {
		ops = t.Failure
	}
	for _, op := range ops {
		switch {
		case op.GetRequestRange() != nil:
			r := op.GetRequestRange()
			switch {
			case r.Revision == 0:
			case r.Revision > tw.Rev():
				return 0, ErrFutureRev
			case r.Revision < compactRev:
				return 0, ErrCompacted
			}
		case op.GetRequestPut() != nil:
			r := op.GetRequestPut()
			if r.IgnoreValue || r.IgnoreLease {
				rr, err := tw.Range(ctx, r.Key, nil, mvcc.RangeOptions{})
				if err != nil {
					return 0, err
				}
				if len(rr.KVs) == 0 {
					return 0, fmt.Errorf("%w: %q", ErrKeyNotFound, r.Key)
				}
			}
		case op.GetRequestTxn() != nil:
			n, err := checkTxn(ctx, tw, op.GetRequestTxn(), path[1:], compactRev)
			if err != nil {
				return 0, err
			}
			txns += n + 1
			path = path[n+1:]
		}
	}
	return txns, nil
}

// executeTxn runs the path's requests in order, filling resp, as etcd's
// executeTxn. It returns how many nested txns it walked.
func executeTxn(ctx context.Context, tw *mvcc.TxnWrite, t *pb.TxnRequest, path []bool, resp *pb.TxnResponse) (int, error) {
	resp.Succeeded = path[0]
	ops := t.Success
	if !path[0] {
		ops = t.Failure
	}
	resp.Responses = make([]*pb.ResponseOp, len(ops))
	txns := 0
	for i, op := range ops {
		out := &pb.ResponseOp{}
		resp.Responses[i] = out
		switch {
		case op.GetRequestRange() != nil:
			r, err := executeRange(ctx, tw, op.GetRequestRange())
			if err != nil {
				return 0, fmt.Errorf("txn range: %w", err)
			}
			out.Response = &pb.ResponseOp_ResponseRange{ResponseRange: r}
		case op.GetRequestPut() != nil:
			r, err := putIn(tw, op.GetRequestPut())
			if err != nil {
				return 0, fmt.Errorf("txn put: %w", err)
			}
			out.Response = &pb.ResponseOp_ResponsePut{ResponsePut: r}
		case op.GetRequestDeleteRange() != nil:
			r, err := deleteIn(ctx, tw, op.GetRequestDeleteRange())
			if err != nil {
				return 0, fmt.Errorf("txn delete: %w", err)
			}
			out.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: r}
		case op.GetRequestTxn() != nil:
			// As etcd's, a nested txn's header is empty: only the
			// outermost carries the revision.
			nested := &pb.TxnResponse{Header: &pb.ResponseHeader{}}
			n, err := executeTxn(ctx, tw, op.GetRequestTxn(), path[1:], nested)
			if err != nil {
				return 0, err
			}
			out.Response = &pb.ResponseOp_ResponseTxn{ResponseTxn: nested}
			txns += n + 1
			path = path[n+1:]
		}
	}
	return txns, nil
}

// CheckTxn is etcd's API check of a Txn (v3rpc checkTxnRequest and
// checkIntervals), which the state repeats at apply: every compare and
// op names a key, every op is one of the four, a put does not give a
// value with ignore_value nor a lease with ignore_lease, and no path
// through the txn writes a key twice or puts a key it deletes (ErrDuplicateKey).
// The limit on the number of ops is the server's.
func CheckTxn(t *pb.TxnRequest) error {
	if err := checkTxnOps(t); err != nil {
		return err
	}
	_, _, err := checkIntervals(t.Success)
	if err == nil {
		_, _, err = checkIntervals(t.Failure)
	}
	return err
}

func checkTxnOps(t *pb.TxnRequest) error {
	for _, c := range t.Compare {
		if c == nil || len(c.Key) == 0 {
			return fmt.Errorf("%w: a compare names no key", ErrInvalid)
		}
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			var err error
			switch {
			case op.GetRequestRange() != nil:
				if len(op.GetRequestRange().Key) == 0 {
					err = fmt.Errorf("%w: a range names no key", ErrInvalid)
				}
			case op.GetRequestPut() != nil:
				err = checkPutRequest(op.GetRequestPut())
			case op.GetRequestDeleteRange() != nil:
				if len(op.GetRequestDeleteRange().Key) == 0 {
					err = fmt.Errorf("%w: a delete names no key", ErrInvalid)
				}
			case op.GetRequestTxn() != nil:
				err = checkTxnOps(op.GetRequestTxn())
			default:
				err = fmt.Errorf("%w: an empty request op", ErrInvalid)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// span is a deleted key range: [key, end), end nil for the key alone and
// empty for no bound.
type span struct{ key, end []byte }

func (s span) contains(k []byte) bool {
	if s.end == nil {
		return bytes.Equal(k, s.key)
	}
	return bytes.Compare(k, s.key) >= 0 && (len(s.end) == 0 || bytes.Compare(k, s.end) < 0)
}

func spanOf(r *pb.DeleteRangeRequest) span {
	switch {
	case len(r.RangeEnd) == 0:
		return span{key: r.Key}
	case len(r.RangeEnd) == 1 && r.RangeEnd[0] == 0:
		return span{key: r.Key, end: []byte{}}
	}
	return span{key: r.Key, end: r.RangeEnd}
}

func deleted(dels []span, k []byte) bool {
	for _, d := range dels {
		if d.contains(k) {
			return true
		}
	}
	return false
}

// checkIntervals is etcd's: the puts and deletes of one list of ops and
// the nested txns under it, refusing a key put twice on one path or put
// and deleted.
func checkIntervals(ops []*pb.RequestOp) (map[string]struct{}, []span, error) {
	var dels []span
	for _, op := range ops {
		if d := op.GetRequestDeleteRange(); d != nil {
			dels = append(dels, spanOf(d))
		}
	}
	puts := map[string]struct{}{}
	for _, op := range ops {
		nt := op.GetRequestTxn()
		if nt == nil {
			continue
		}
		putsThen, delsThen, err := checkIntervals(nt.Success)
		if err != nil {
			return nil, nil, err
		}
		putsElse, delsElse, err := checkIntervals(nt.Failure)
		if err != nil {
			return nil, nil, err
		}
		for k := range putsThen {
			if _, ok := puts[k]; ok || deleted(dels, []byte(k)) {
				return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				// Then and else exclude each other: the same key in both
				// is fine.
				if _, safe := putsThen[k]; !safe {
					return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
				}
			}
			if deleted(dels, []byte(k)) {
				return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, op := range ops {
		p := op.GetRequestPut()
		if p == nil {
			continue
		}
		k := string(p.Key)
		if _, ok := puts[k]; ok || deleted(dels, p.Key) {
			return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}
