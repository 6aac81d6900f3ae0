package kvservice

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// This file turns etcd's requests into the kvfsm state machine's commands
// and its results back into etcd's responses. It is what changes when the
// state does; the checks of Limits are the service's own and stay.

func (l Limits) key(what string, k []byte) error {
	switch {
	case len(k) == 0:
		return fmt.Errorf("%s: %w", what, ErrEmptyKey)
	case len(k) > l.MaxKeyBytes:
		return fmt.Errorf("%w: %s of %d bytes exceeds the limit of %d", ErrKeyTooLarge, what, len(k), l.MaxKeyBytes)
	case strings.HasPrefix(string(k), kvfsm.SystemPrefix):
		// The member directory's records (internal/directory) live under
		// this prefix until the state has a namespace of its own for
		// them; this is the one place that keeps clients out of it.
		return invalidf("%s %q is under the prefix edictkv keeps for itself (%q)", what, k, kvfsm.SystemPrefix)
	}
	return nil
}

func (l Limits) rangeEnd(end []byte) error {
	if len(end) > l.MaxKeyBytes {
		return fmt.Errorf("%w: range_end of %d bytes exceeds the limit of %d", ErrKeyTooLarge, len(end), l.MaxKeyBytes)
	}
	return nil
}

// rangeOf converts a RangeRequest into the state machine's Range and what
// is left to do on its result (etcd's order: prune by revisions, sort,
// then apply the limit). The revision to read at is checked against the
// result (checkRevision).
func (l Limits) rangeOf(r *pb.RangeRequest) (kvfsm.Range, rangePost, error) {
	if err := l.key("key", r.Key); err != nil {
		return kvfsm.Range{}, rangePost{}, err
	}
	if err := l.rangeEnd(r.RangeEnd); err != nil {
		return kvfsm.Range{}, rangePost{}, err
	}
	if r.Limit < 0 {
		return kvfsm.Range{}, rangePost{}, invalidf("negative limit %d", r.Limit)
	}
	for _, rev := range []int64{r.Revision, r.MinModRevision, r.MaxModRevision, r.MinCreateRevision, r.MaxCreateRevision} {
		if rev < 0 {
			return kvfsm.Range{}, rangePost{}, invalidf("negative revision %d", rev)
		}
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return kvfsm.Range{}, rangePost{}, invalidf("unknown sort order %d", r.SortOrder)
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return kvfsm.Range{}, rangePost{}, invalidf("unknown sort target %d", r.SortTarget)
	}
	q := kvfsm.Range{Key: string(r.Key), RangeEnd: string(r.RangeEnd), Limit: uint64(r.Limit),
		CountOnly: r.CountOnly, KeysOnly: r.KeysOnly}
	post := rangePost{limit: r.Limit, order: r.SortOrder, target: r.SortTarget,
		minMod: r.MinModRevision, maxMod: r.MaxModRevision, minCreate: r.MinCreateRevision, maxCreate: r.MaxCreateRevision}
	// etcd sorts by key ascending for free; any other target defaults to
	// ascending.
	switch {
	case post.target != pb.RangeRequest_KEY && post.order == pb.RangeRequest_NONE:
		post.order = pb.RangeRequest_ASCEND
	case post.target == pb.RangeRequest_KEY && post.order == pb.RangeRequest_ASCEND:
		post.order = pb.RangeRequest_NONE
	}
	if post.needed() {
		q.Limit = 0 // everything, then prune, sort and cut here
	}
	return q, post, nil
}

// rangePost is the part of a RangeRequest the state machine does not do.
type rangePost struct {
	limit                                int64
	order                                pb.RangeRequest_SortOrder
	target                               pb.RangeRequest_SortTarget
	minMod, maxMod, minCreate, maxCreate int64
}

func (p rangePost) needed() bool {
	return p.order != pb.RangeRequest_NONE || p.minMod != 0 || p.maxMod != 0 || p.minCreate != 0 || p.maxCreate != 0
}

// apply prunes, sorts and limits kvs as etcd's Range does; Count stays the
// count of the whole range, as in etcd.
func (p rangePost) apply(rr *kvfsm.RangeResult) (kvs []kvfsm.KeyValue, more bool) {
	if !p.needed() {
		return rr.KVs, rr.More
	}
	kvs = slices.DeleteFunc(slices.Clone(rr.KVs), func(kv kvfsm.KeyValue) bool {
		mod, create := int64(kv.ModRevision), int64(kv.CreateRevision)
		return (p.maxMod != 0 && mod > p.maxMod) || (p.minMod != 0 && mod < p.minMod) ||
			(p.maxCreate != 0 && create > p.maxCreate) || (p.minCreate != 0 && create < p.minCreate)
	})
	if p.order != pb.RangeRequest_NONE {
		by := func(a, b kvfsm.KeyValue) int {
			switch p.target {
			case pb.RangeRequest_VERSION:
				return cmp.Compare(a.Version, b.Version)
			case pb.RangeRequest_CREATE:
				return cmp.Compare(a.CreateRevision, b.CreateRevision)
			case pb.RangeRequest_MOD:
				return cmp.Compare(a.ModRevision, b.ModRevision)
			case pb.RangeRequest_VALUE:
				return cmp.Compare(a.Value, b.Value)
			}
			return cmp.Compare(a.Key, b.Key)
		}
		if p.order == pb.RangeRequest_DESCEND {
			slices.SortStableFunc(kvs, func(a, b kvfsm.KeyValue) int { return by(b, a) })
		} else {
			slices.SortStableFunc(kvs, by)
		}
	}
	if p.limit > 0 && int64(len(kvs)) > p.limit {
		kvs, more = kvs[:p.limit], true
	}
	return kvs, more
}

func (l Limits) putOf(r *pb.PutRequest) (*kvfsm.Put, error) {
	switch {
	case r.Lease != 0:
		return nil, unsupportedf("leases: Put with lease %d", r.Lease)
	case r.IgnoreValue:
		return nil, unsupportedf("Put with ignore_value")
	case r.IgnoreLease:
		return nil, unsupportedf("Put with ignore_lease")
	}
	if err := l.key("key", r.Key); err != nil {
		return nil, err
	}
	if len(r.Value) > l.MaxValueBytes {
		return nil, fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", ErrValueTooLarge, len(r.Value), l.MaxValueBytes)
	}
	return &kvfsm.Put{Key: string(r.Key), Value: string(r.Value), PrevKV: r.PrevKv}, nil
}

func (l Limits) deleteOf(r *pb.DeleteRangeRequest) (*kvfsm.Delete, error) {
	if err := l.key("key", r.Key); err != nil {
		return nil, err
	}
	if err := l.rangeEnd(r.RangeEnd); err != nil {
		return nil, err
	}
	return &kvfsm.Delete{Key: string(r.Key), RangeEnd: string(r.RangeEnd), PrevKV: r.PrevKv}, nil
}

// txnOf converts a TxnRequest, keeping the post-processing each branch's
// ranges need.
func (l Limits) txnOf(r *pb.TxnRequest) (*kvfsm.Txn, txnPost, error) {
	if n := max(len(r.Compare), len(r.Success), len(r.Failure)); n > l.MaxTxnOps {
		return nil, txnPost{}, fmt.Errorf("%w: %d operations in one branch or compares, over the limit of %d", ErrTooManyOps, n, l.MaxTxnOps)
	}
	t := &kvfsm.Txn{}
	for i, c := range r.Compare {
		fc, err := l.compareOf(c)
		if err != nil {
			return nil, txnPost{}, at(fmt.Sprintf("compare %d", i), err)
		}
		t.Compares = append(t.Compares, fc)
	}
	var post txnPost
	var err error
	if t.Success, post.success, err = l.opsOf(r.Success); err != nil {
		return nil, txnPost{}, at("success", err)
	}
	if t.Failure, post.failure, err = l.opsOf(r.Failure); err != nil {
		return nil, txnPost{}, at("failure", err)
	}
	if err := (&kvfsm.Command{Txn: t}).Validate(); err != nil {
		if errors.Is(err, kvfsm.ErrDuplicateKey) {
			return nil, txnPost{}, fmt.Errorf("%w: %v", ErrDuplicateKey, err)
		}
		return nil, txnPost{}, invalidf("%v", err)
	}
	return t, post, nil
}

// txnPost holds, per op of each branch, the range post-processing (zero
// for writes).
type txnPost struct{ success, failure []rangePost }

var compareOps = map[pb.Compare_CompareResult]kvfsm.CompareOp{
	pb.Compare_EQUAL: kvfsm.Equal, pb.Compare_NOT_EQUAL: kvfsm.NotEqual, pb.Compare_LESS: kvfsm.Less, pb.Compare_GREATER: kvfsm.Greater,
}

func (l Limits) compareOf(c *pb.Compare) (kvfsm.Compare, error) {
	if c == nil {
		return kvfsm.Compare{}, invalidf("empty compare")
	}
	if len(c.RangeEnd) != 0 {
		return kvfsm.Compare{}, unsupportedf("Txn compares over a key range (range_end)")
	}
	if err := l.key("compare key", c.Key); err != nil {
		return kvfsm.Compare{}, err
	}
	op, ok := compareOps[c.Result]
	if !ok {
		return kvfsm.Compare{}, invalidf("unknown compare result %d", c.Result)
	}
	out := kvfsm.Compare{Key: string(c.Key), Op: op}
	number := func(n int64, target kvfsm.CompareTarget) error {
		if n < 0 {
			return invalidf("compare %v with negative operand %d", target, n)
		}
		out.Target, out.Number = target, uint64(n)
		return nil
	}
	var err error
	switch c.Target {
	case pb.Compare_VALUE:
		out.Target, out.Value = kvfsm.TargetValue, string(c.GetValue())
	case pb.Compare_VERSION:
		err = number(c.GetVersion(), kvfsm.TargetVersion)
	case pb.Compare_CREATE:
		err = number(c.GetCreateRevision(), kvfsm.TargetCreateRevision)
	case pb.Compare_MOD:
		err = number(c.GetModRevision(), kvfsm.TargetModRevision)
	case pb.Compare_LEASE:
		return kvfsm.Compare{}, unsupportedf("leases: Txn compare on a key's lease")
	default:
		return kvfsm.Compare{}, invalidf("unknown compare target %d", c.Target)
	}
	return out, err
}

func (l Limits) opsOf(reqs []*pb.RequestOp) ([]kvfsm.Op, []rangePost, error) {
	if len(reqs) == 0 {
		return nil, nil, nil
	}
	ops := make([]kvfsm.Op, len(reqs))
	posts := make([]rangePost, len(reqs))
	for i, r := range reqs {
		var err error
		switch {
		case r.GetRequestRange() != nil:
			rr := r.GetRequestRange()
			if rr.Revision != 0 {
				return nil, nil, at(fmt.Sprintf("op %d", i), unsupportedf("a Range at a past revision inside a Txn"))
			}
			var q kvfsm.Range
			q, posts[i], err = l.rangeOf(rr)
			ops[i].Range = &q
		case r.GetRequestPut() != nil:
			ops[i].Put, err = l.putOf(r.GetRequestPut())
		case r.GetRequestDeleteRange() != nil:
			ops[i].Delete, err = l.deleteOf(r.GetRequestDeleteRange())
		case r.GetRequestTxn() != nil:
			err = unsupportedf("nested Txn requests")
		default:
			err = invalidf("empty request op")
		}
		if err != nil {
			return nil, nil, at(fmt.Sprintf("op %d", i), err)
		}
	}
	return ops, posts, nil
}

// answer builds etcd's responses from the state machine's results, and
// collects the stamp of every revision it names.
type answer struct {
	stamps map[int64]edict.Stamp
}

func (a *answer) stamp(rev uint64, s edict.Stamp) {
	if s.IsZero() {
		return
	}
	if a.stamps == nil {
		a.stamps = map[int64]edict.Stamp{}
	}
	a.stamps[int64(rev)] = s
}

func (a *answer) kv(kv *kvfsm.KeyValue) *mvccpb.KeyValue {
	a.stamp(kv.ModRevision, kv.Stamp)
	out := &mvccpb.KeyValue{Key: []byte(kv.Key), CreateRevision: int64(kv.CreateRevision),
		ModRevision: int64(kv.ModRevision), Version: int64(kv.Version)}
	if kv.Value != "" {
		out.Value = []byte(kv.Value)
	}
	return out
}

func (a *answer) kvs(kvs []kvfsm.KeyValue) []*mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*mvccpb.KeyValue, len(kvs))
	for i := range kvs {
		out[i] = a.kv(&kvs[i])
	}
	return out
}

func (a *answer) rangeResponse(h *pb.ResponseHeader, rr *kvfsm.RangeResult, post rangePost) *pb.RangeResponse {
	kvs, more := post.apply(rr)
	return &pb.RangeResponse{Header: h, Kvs: a.kvs(kvs), More: more, Count: int64(rr.Count)}
}

func (a *answer) putResponse(h *pb.ResponseHeader, r *kvfsm.PutResult) *pb.PutResponse {
	out := &pb.PutResponse{Header: h}
	if r.PrevKV != nil {
		out.PrevKv = a.kv(r.PrevKV)
	}
	return out
}

func (a *answer) deleteResponse(h *pb.ResponseHeader, r *kvfsm.DeleteResult) *pb.DeleteRangeResponse {
	return &pb.DeleteRangeResponse{Header: h, Deleted: int64(r.Deleted), PrevKvs: a.kvs(r.PrevKVs)}
}

func (a *answer) txnResponse(h *pb.ResponseHeader, r *kvfsm.TxnResult, post txnPost) (*pb.TxnResponse, error) {
	posts := post.success
	if !r.Succeeded {
		posts = post.failure
	}
	if len(r.Responses) != len(posts) {
		return nil, fmt.Errorf("kvservice: txn answered %d ops for a branch of %d", len(r.Responses), len(posts))
	}
	out := &pb.TxnResponse{Header: h, Succeeded: r.Succeeded, Responses: make([]*pb.ResponseOp, len(r.Responses))}
	for i, o := range r.Responses {
		switch {
		case o.Range != nil:
			out.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: a.rangeResponse(h, o.Range, posts[i])}}
		case o.Put != nil:
			out.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: a.putResponse(h, o.Put)}}
		case o.Delete != nil:
			out.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: a.deleteResponse(h, o.Delete)}}
		default:
			return nil, fmt.Errorf("kvservice: txn op %d has no response", i)
		}
	}
	return out, nil
}
