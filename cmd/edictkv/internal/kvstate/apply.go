package kvstate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// Result is what Apply answers for an entry: the response of the request
// it carried, or its refusal. The log hands it to whoever proposed the
// entry (edictlog.ApplyResult.Response).
type Result struct {
	// Index is the entry's log index.
	Index uint64
	// Rev is the store's revision after the entry: etcd's header revision
	// of a write (the write's own revision if it changed anything).
	Rev int64
	// Err is the refusal, if the request was refused: it changed nothing
	// but the consistent index. It wraps ErrBadRequest, ErrInvalid,
	// ErrDuplicateKey, ErrKeyNotFound, ErrCompacted, ErrFutureRev,
	// ErrNoSpace, ErrCorrupt or ErrApplied; any other error is the
	// store's failure.
	Err error

	// The response, for the request's kind; nil when refused. Their
	// headers carry Revision alone; the server fills in the rest.
	Put         *pb.PutResponse
	DeleteRange *pb.DeleteRangeResponse
	Txn         *pb.TxnResponse
	Compaction  *pb.CompactionResponse
	Alarm       *pb.AlarmResponse
	// Physical, for a compaction that was scheduled, is closed once its
	// removal from the store is done and committed (etcd's physical
	// compaction). The store's background compactor performs it
	// (Options.Store.Background), or CompactStep.
	Physical <-chan struct{}
	// Stamps holds the edict stamp of every revision the response names
	// (kvs' mod_revision, prev_kv's) and of the write's own revision.
	Stamps map[int64]edict.Stamp
}

// Apply implements fsm.FSM: it applies one committed entry with etcd's
// semantics and returns its *Result. The entry's index is recorded with
// its effects, atomically; an entry with empty Data (the log's own) only
// records it. A request the state refuses is a Result with Err, never a
// panic, the same on every replica. An entry at or below the consistent
// index is already applied (a start that replays entries the store holds)
// and is skipped with ErrApplied.
func (s *State) Apply(e fsm.Entry) any {
	defer s.revMoved()
	res := &Result{Index: e.Index}
	if e.Index <= s.st.ConsistentIndex() {
		res.Err, res.Rev = fmt.Errorf("%w: index %d, consistent index %d", ErrApplied, e.Index, s.st.ConsistentIndex()), s.Rev()
		return res
	}
	var req *Request
	if len(e.Data) != 0 {
		var err error
		if req, err = DecodeRequest(e.Data); err != nil {
			res.Err = err
		}
	}
	if req != nil && req.Compaction != nil {
		s.compact(e, req.Compaction, res)
		return res
	}
	tw, err := s.st.Write(e.Index)
	if err != nil {
		res.Err, res.Rev = fmt.Errorf("kvstate: apply entry %d: %w", e.Index, err), s.Rev()
		return res
	}
	ctx := context.Background()
	if err := s.collectStamps(ctx, tw); err != nil {
		res.Err = err
	} else if req != nil {
		s.dispatch(ctx, tw, e, req, res)
	}
	if tw.Changes() > 0 {
		// PutRecord copies them: the record is built on the stack.
		var kb [9]byte
		var vb [128]byte
		rev := tw.Rev() + 1
		if err := tw.PutRecord(appendStampKey(kb[:0], rev), appendStampRecord(vb[:0], e.Index, e.Stamp)); err != nil && res.Err == nil {
			res.Err = err
		}
	}
	changed := tw.Changes() > 0
	res.Rev = tw.End()
	if res.Err != nil {
		s.clearResponses(res)
		return res
	}
	if req != nil {
		s.afterSystem(req)
		names := stamps{}
		if changed && !e.Stamp.IsZero() {
			names[res.Rev] = e.Stamp
		}
		var buf [8]int64
		if err := names.collect(s.st, namedRevs(buf[:0], res)); err != nil {
			res.Err = err
			s.clearResponses(res)
			return res
		}
		if len(names) > 0 {
			res.Stamps = names
		}
	}
	return res
}

func (s *State) clearResponses(res *Result) {
	res.Put, res.DeleteRange, res.Txn, res.Alarm = nil, nil, nil, nil
}

// namedRevs appends the revisions res's response names to dst.
func namedRevs(dst []int64, res *Result) []int64 {
	switch {
	case res.Put != nil && res.Put.PrevKv != nil:
		dst = append(dst, res.Put.PrevKv.ModRevision)
	case res.DeleteRange != nil:
		dst = appendKVs(dst, res.DeleteRange.PrevKvs)
	case res.Txn != nil:
		dst = appendResponses(dst, res.Txn.Responses)
	}
	return dst
}

// dispatch runs req in tw. A refusal is left in res.Err with nothing
// written.
func (s *State) dispatch(ctx context.Context, tw *mvcc.TxnWrite, e fsm.Entry, req *Request, res *Result) {
	switch {
	case req.Put != nil:
		switch {
		case s.alarmed(pb.AlarmType_CORRUPT):
			res.Err = ErrCorrupt
		case s.alarmed(pb.AlarmType_NOSPACE):
			res.Err = ErrNoSpace
		default:
			res.Put, res.Err = put(tw, req.Put)
		}
	case req.DeleteRange != nil:
		if s.alarmed(pb.AlarmType_CORRUPT) {
			res.Err = ErrCorrupt
			return
		}
		res.DeleteRange, res.Err = deleteRange(ctx, tw, req.DeleteRange)
	case req.Txn != nil:
		switch {
		case s.alarmed(pb.AlarmType_CORRUPT):
			res.Err = ErrCorrupt
		case s.alarmed(pb.AlarmType_NOSPACE) && txnPuts(req.Txn):
			res.Err = ErrNoSpace
		default:
			res.Txn, res.Err = applyTxn(ctx, tw, req.Txn, s.st.CompactRev())
		}
	case req.MemberPut != nil:
		for _, a := range req.MemberPut.Attrs {
			if err := tw.PutRecord(memberKey(req.MemberPut.ID, a.Name), []byte(a.Value)); err != nil {
				res.Err = err
				return
			}
		}
	case req.MemberDelete != nil:
		for name := range s.Member(req.MemberDelete.ID) {
			if err := tw.DeleteRecord(memberKey(req.MemberDelete.ID, name)); err != nil {
				res.Err = err
				return
			}
		}
	case req.Alarm != nil:
		res.Alarm, res.Err = s.alarm(tw, req.Alarm)
	}
}

// afterSystem updates the in-memory copy of the system namespace once
// the write that recorded a system request ended.
func (s *State) afterSystem(req *Request) {
	switch {
	case req.MemberPut != nil:
		s.mu.Lock()
		m := s.members[req.MemberPut.ID]
		if m == nil {
			m = map[string]string{}
			s.members[req.MemberPut.ID] = m
		}
		for _, a := range req.MemberPut.Attrs {
			m[a.Name] = a.Value
		}
		s.mu.Unlock()
	case req.MemberDelete != nil:
		s.mu.Lock()
		delete(s.members, req.MemberDelete.ID)
		s.mu.Unlock()
	case req.Alarm != nil:
		a := &pb.AlarmMember{MemberID: req.Alarm.MemberID, Alarm: req.Alarm.Alarm}
		s.mu.Lock()
		i, found := slices.BinarySearchFunc(s.alarms, a, cmpAlarm)
		switch {
		case req.Alarm.Action == pb.AlarmRequest_ACTIVATE && a.Alarm != pb.AlarmType_NONE && !found:
			s.alarms = slices.Insert(s.alarms, i, a)
		case req.Alarm.Action == pb.AlarmRequest_DEACTIVATE && found:
			s.alarms = slices.Delete(s.alarms, i, i+1)
		}
		s.mu.Unlock()
	}
}

func cmpAlarm(a, b *pb.AlarmMember) int {
	switch {
	case a.MemberID != b.MemberID:
		if a.MemberID < b.MemberID {
			return -1
		}
		return 1
	case a.Alarm < b.Alarm:
		return -1
	case a.Alarm > b.Alarm:
		return 1
	}
	return 0
}

// alarm is etcd's applierV3backend.Alarm, recording the change.
func (s *State) alarm(tw *mvcc.TxnWrite, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp := &pb.AlarmResponse{Header: &pb.ResponseHeader{}}
	a := &pb.AlarmMember{MemberID: r.MemberID, Alarm: r.Alarm}
	s.mu.RLock()
	_, found := slices.BinarySearchFunc(s.alarms, a, cmpAlarm)
	s.mu.RUnlock()
	switch r.Action {
	case pb.AlarmRequest_GET:
		resp.Alarms = s.Alarms(r.Alarm)
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		if _, ok := pb.AlarmType_name[int32(r.Alarm)]; !ok {
			return nil, fmt.Errorf("%w: unknown alarm type %d", ErrInvalid, r.Alarm)
		}
		if !found {
			if err := tw.PutRecord(alarmKey(a), nil); err != nil {
				return nil, err
			}
		}
		resp.Alarms = []*pb.AlarmMember{a}
	case pb.AlarmRequest_DEACTIVATE:
		if !found {
			break
		}
		if err := tw.DeleteRecord(alarmKey(a)); err != nil {
			return nil, err
		}
		resp.Alarms = []*pb.AlarmMember{a}
	default:
		return nil, fmt.Errorf("%w: unknown alarm action %d", ErrInvalid, r.Action)
	}
	return resp, nil
}

// compact applies a Compaction: mvcc.Store.Compact at the entry's index.
// ErrCompacted and ErrFutureRev are refusals; the header revision is the
// store's.
func (s *State) compact(e fsm.Entry, r *pb.CompactionRequest, res *Result) {
	if s.alarmed(pb.AlarmType_CORRUPT) {
		res.Err = ErrCorrupt
		if err := s.st.SetConsistentIndex(e.Index); err != nil {
			res.Err = fmt.Errorf("kvstate: apply entry %d: %w", e.Index, err)
		}
		res.Rev = s.Rev()
		return
	}
	ch, err := s.st.Compact(e.Index, r.Revision)
	res.Rev = s.Rev()
	if err != nil {
		if !errors.Is(err, mvcc.ErrCompacted) && !errors.Is(err, mvcc.ErrFutureRev) {
			err = fmt.Errorf("kvstate: apply entry %d: %w", e.Index, err)
		}
		res.Err = err
		return
	}
	res.Compaction = &pb.CompactionResponse{Header: &pb.ResponseHeader{Revision: res.Rev}}
	res.Physical = ch
}

// txnPuts is etcd's quota cost of a Txn being positive: a put among the
// top-level ops of either branch.
func txnPuts(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if op.GetRequestPut() != nil {
				return true
			}
		}
	}
	return false
}
