package kvstate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestPut(t *testing.T) {
	h := newHarness(t)
	assert.Equal(t, int64(1), h.s.Rev(), "an empty state is at revision 1")

	res := h.put("a", "1")
	assert.Equal(t, int64(2), res.Rev, "the first write gets revision 2")
	assert.Equal(t, int64(2), res.Put.Header.Revision)
	assert.Nil(t, res.Put.PrevKv)
	assert.Equal(t, stampAt(1), res.Stamps[2], "the write's own stamp")

	res = h.ok(&Request{Put: &pb.PutRequest{Key: []byte("a"), Value: []byte("2"), PrevKv: true, Lease: 7}})
	assert.Equal(t, int64(3), res.Rev)
	require.NotNil(t, res.Put.PrevKv)
	assert.Equal(t, &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("1"), CreateRevision: 2, ModRevision: 2, Version: 1}, res.Put.PrevKv)
	assert.Equal(t, stampAt(1), res.Stamps[2], "prev_kv's stamp")
	assert.Equal(t, stampAt(2), res.Stamps[3])
	kv := h.get("a", 0).Kvs[0]
	assert.Equal(t, &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("2"), CreateRevision: 2, ModRevision: 3, Version: 2, Lease: 7}, kv, "the lease ID is kept")

	res = h.ok(&Request{Put: &pb.PutRequest{Key: []byte("a"), IgnoreValue: true, Lease: 9}})
	kv = h.get("a", 0).Kvs[0]
	assert.Equal(t, []byte("2"), kv.Value, "ignore_value keeps the value")
	assert.Equal(t, int64(9), kv.Lease)
	assert.Equal(t, int64(4), res.Rev)

	h.ok(&Request{Put: &pb.PutRequest{Key: []byte("a"), Value: []byte("3"), IgnoreLease: true}})
	kv = h.get("a", 0).Kvs[0]
	assert.Equal(t, int64(9), kv.Lease, "ignore_lease keeps the lease")
	assert.Equal(t, int64(4), kv.Version)

	for _, r := range []*pb.PutRequest{
		{Key: []byte("missing"), IgnoreValue: true},
		{Key: []byte("missing"), Value: []byte("v"), IgnoreLease: true},
	} {
		res = h.apply(&Request{Put: r})
		assert.ErrorIs(t, res.Err, ErrKeyNotFound)
		assert.Nil(t, res.Put)
		assert.Equal(t, int64(5), res.Rev, "a refusal makes no revision")
	}
	for _, r := range []*pb.PutRequest{
		{Key: nil, Value: []byte("v")},
		{Key: []byte("a"), Value: []byte("v"), IgnoreValue: true},
		{Key: []byte("a"), Lease: 1, IgnoreLease: true},
	} {
		res = h.apply(&Request{Put: r})
		assert.ErrorIs(t, res.Err, ErrInvalid, "%v", r)
	}
	assert.Equal(t, int64(5), h.s.Rev())
	assert.Equal(t, h.index, h.s.AppliedIndex(), "refused entries are applied all the same")
}

func TestDeleteRange(t *testing.T) {
	h := newHarness(t)
	for _, k := range []string{"a", "b", "c", "d"} {
		h.put(k, k)
	}
	res := h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("b"), RangeEnd: []byte("d"), PrevKv: true}})
	assert.Equal(t, int64(6), res.Rev)
	assert.Equal(t, int64(2), res.DeleteRange.Deleted)
	assert.Equal(t, int64(6), res.DeleteRange.Header.Revision)
	require.Len(t, res.DeleteRange.PrevKvs, 2)
	assert.Equal(t, "b", string(res.DeleteRange.PrevKvs[0].Key))
	assert.Equal(t, stampAt(2), res.Stamps[3], "the stamp of a deleted pair")

	res = h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("x")}})
	assert.Equal(t, int64(0), res.DeleteRange.Deleted)
	assert.Equal(t, int64(6), res.Rev, "deleting nothing makes no revision")
	assert.Equal(t, int64(6), res.DeleteRange.Header.Revision)

	res = h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}})
	assert.Equal(t, int64(2), res.DeleteRange.Deleted, "from the first key on")
	assert.Zero(t, h.all().Count)
	assert.Equal(t, []byte("b"), h.get("b", 5).Kvs[0].Value, "history stays")
}

func TestEmptyEntry(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	res := h.entry(nil)
	assert.NoError(t, res.Err)
	assert.Equal(t, int64(2), res.Rev)
	assert.Equal(t, uint64(2), h.s.AppliedIndex())
	rev, err := h.s.Query(nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 2}, rev)
	_, err = h.s.Query([]byte("x"))
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestBadEntries(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	for _, data := range [][]byte{{9}, {EnvelopeVersion, 0, 0, 99}, {EnvelopeVersion, 0, 0, byte(KindPut), 0xff}} {
		res := h.entry(data)
		assert.ErrorIs(t, res.Err, ErrBadRequest, "%x", data)
		assert.Equal(t, int64(2), res.Rev)
	}
	assert.Equal(t, h.index, h.s.AppliedIndex())
	res := h.s.Apply(fsmEntry(2, nil)).(*Result)
	assert.ErrorIs(t, res.Err, ErrApplied, "an index at or below the consistent index is skipped")
	assert.Equal(t, int64(2), h.s.Rev())
}

func TestRangeAtRevisions(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	h.put("b", "1")
	h.put("a", "2")
	ctx := context.Background()
	resp, st, err := h.s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), Revision: 3})
	require.NoError(t, err)
	assert.Equal(t, int64(4), resp.Header.Revision, "the header carries the current revision")
	require.Len(t, resp.Kvs, 2)
	assert.Equal(t, []byte("1"), resp.Kvs[0].Value)
	assert.Equal(t, stampAt(1), st[2])
	assert.Equal(t, stampAt(2), st[3])

	resp, _, err = h.s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), SortTarget: pb.RangeRequest_MOD,
		SortOrder: pb.RangeRequest_DESCEND, Limit: 1})
	require.NoError(t, err)
	assert.True(t, resp.More)
	assert.Equal(t, int64(2), resp.Count)
	assert.Equal(t, "a", string(resp.Kvs[0].Key))

	_, _, err = h.s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: 5})
	assert.ErrorIs(t, err, ErrFutureRev)
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	_, _, err = h.s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: 2})
	assert.ErrorIs(t, err, ErrCompacted)
	resp, _, err = h.s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: 3})
	require.NoError(t, err, "a read at the compaction revision")
	assert.Equal(t, []byte("1"), resp.Kvs[0].Value)
	_, _, err = h.s.Range(ctx, &pb.RangeRequest{})
	assert.ErrorIs(t, err, ErrInvalid)
}

// RangeUnstamped, the etcd API's read, answers what Range answers, and
// refuses what it refuses; only the stamps are left out.
func TestRangeUnstampedAnswersAsRange(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")                                                       // rev 2
	h.put("b", "1")                                                       // rev 3
	h.put("a", "2")                                                       // rev 4
	h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("b")}}) // rev 5
	h.put("c", "3")                                                       // rev 6
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	ctx := context.Background()
	for _, r := range []*pb.RangeRequest{
		{Key: []byte("a")},
		{Key: []byte("a"), RangeEnd: []byte("d"), Revision: 3},
		{Key: []byte{0}, RangeEnd: []byte{0}, SortTarget: pb.RangeRequest_MOD, SortOrder: pb.RangeRequest_DESCEND, Limit: 1},
		{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true},
		{Key: []byte("a"), RangeEnd: []byte("z"), KeysOnly: true, MinModRevision: 4},
		{Key: []byte("b")},
		{Key: []byte("a"), Revision: 2},
		{Key: []byte("a"), Revision: 9},
		{},
	} {
		want, _, wantErr := h.s.Range(ctx, r)
		got, err := h.s.RangeUnstamped(ctx, r)
		assert.Equal(t, wantErr, err, "%v", r)
		assert.Equal(t, want, got, "%v", r)
	}
	h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_CORRUPT}})
	_, err := h.s.RangeUnstamped(ctx, &pb.RangeRequest{Key: []byte("a")})
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestCompaction(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.put("a", fmt.Sprint(i))
	}
	res := h.apply(&Request{Compaction: &pb.CompactionRequest{Revision: 7}})
	assert.ErrorIs(t, res.Err, ErrFutureRev)
	res = h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 4, Physical: true}})
	assert.Equal(t, int64(6), res.Rev)
	assert.Equal(t, int64(6), res.Compaction.Header.Revision)
	require.NotNil(t, res.Physical)
	select {
	case <-res.Physical:
		t.Fatal("the removal is done before any step")
	default:
	}
	for {
		more, err := h.s.CompactStep()
		require.NoError(t, err)
		if !more {
			break
		}
	}
	<-res.Physical
	assert.Equal(t, int64(4), h.s.CompactRev())
	res = h.apply(&Request{Compaction: &pb.CompactionRequest{Revision: 4}})
	assert.ErrorIs(t, res.Err, ErrCompacted)
	res = h.apply(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	assert.ErrorIs(t, res.Err, ErrCompacted)
	assert.Equal(t, h.index, h.s.AppliedIndex())
	_, err := h.s.RevisionIndex(3)
	assert.ErrorIs(t, err, ErrCompacted)
	idx, err := h.s.RevisionIndex(5)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), idx, "revision 5 was made by entry 4")
}

func TestStampsAfterCompaction(t *testing.T) {
	h := newHarness(t)
	h.put("old", "x")  // rev 2, entry 1: alive at the compaction
	h.put("gone", "1") // rev 3
	h.put("gone", "2") // rev 4
	h.put("new", "y")  // rev 5
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 4}})
	h.entry(nil) // the first entry after the compaction collects the stamps
	_, st, err := h.s.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	require.NoError(t, err)
	assert.Equal(t, map[int64]bool{2: true, 4: true, 5: true}, keys(st))
	assert.Equal(t, stampAt(1), st[2], "a pair older than the compaction keeps its stamp")

	rv, err := h.s.st.ReadRecords()
	require.NoError(t, err)
	var recs []int64
	rv.Ascend(stampKey(0), stampKey(1<<62), func(k, _ []byte) bool {
		recs = append(recs, int64(k[8])) // small revisions
		return true
	})
	rv.Release()
	assert.Equal(t, []int64{2, 4, 5}, recs, "the stamp of revision 3 is gone: no read can name it")
	h.reopen(false)
	assert.Equal(t, int64(4), h.s.stampsFrom)
}

func keys[V any](m map[int64]V) map[int64]bool {
	out := map[int64]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func TestAlarms(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	res := h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 3, Alarm: pb.AlarmType_NOSPACE}})
	assert.Equal(t, []*pb.AlarmMember{{MemberID: 3, Alarm: pb.AlarmType_NOSPACE}}, res.Alarm.Alarms)
	assert.Equal(t, int64(2), res.Rev, "an alarm makes no revision")
	assert.Len(t, h.s.Alarms(pb.AlarmType_NONE), 1)

	res = h.apply(&Request{Put: &pb.PutRequest{Key: []byte("b"), Value: []byte("v")}})
	assert.ErrorIs(t, res.Err, ErrNoSpace)
	res = h.apply(&Request{Txn: &pb.TxnRequest{Failure: []*pb.RequestOp{putOp("b", "v")}}})
	assert.ErrorIs(t, res.Err, ErrNoSpace, "a txn with a put in either branch")
	h.ok(&Request{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a")})}}})
	h.ok(&Request{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{txnOp(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("n", "v")}})}}})
	assert.Equal(t, int64(3), h.s.Rev(), "etcd counts only a txn's top-level puts")
	res = h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}})
	assert.Equal(t, int64(1), res.DeleteRange.Deleted, "deletes go on")
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})

	h.reopen(false)
	res = h.apply(&Request{Put: &pb.PutRequest{Key: []byte("b"), Value: []byte("v")}})
	assert.ErrorIs(t, res.Err, ErrNoSpace, "the alarm survives a restart")
	res = h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_GET}})
	assert.Len(t, res.Alarm.Alarms, 1)
	res = h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: 3, Alarm: pb.AlarmType_NOSPACE}})
	assert.Len(t, res.Alarm.Alarms, 1)
	res = h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: 3, Alarm: pb.AlarmType_NOSPACE}})
	assert.Empty(t, res.Alarm.Alarms, "nothing to deactivate")
	h.put("b", "v")

	h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_CORRUPT}})
	for _, r := range []*Request{
		{Put: &pb.PutRequest{Key: []byte("b")}},
		{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("b")}},
		{Txn: &pb.TxnRequest{}},
		{Compaction: &pb.CompactionRequest{Revision: 4}},
	} {
		assert.ErrorIs(t, h.apply(r).Err, ErrCorrupt, "%+v", r)
	}
	_, _, err := h.s.Range(context.Background(), &pb.RangeRequest{Key: []byte("b")})
	assert.ErrorIs(t, err, ErrCorrupt)
	res = h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_NONE}})
	assert.Empty(t, res.Alarm.Alarms, "activating NONE does nothing")
	res = h.apply(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: 42}})
	assert.ErrorIs(t, res.Err, ErrInvalid)
}

func TestSystemNamespace(t *testing.T) {
	h := newHarness(t)
	h.put("\x00edictkv/http/1", "user's own")
	res := h.ok(&Request{MemberPut: &MemberPut{ID: 1, Attrs: []Attr{{Name: "http", Value: "h:1"}, {Name: "grpc", Value: "g:1"}}}})
	assert.Equal(t, int64(2), res.Rev, "a system record makes no revision")
	h.ok(&Request{MemberPut: &MemberPut{ID: 1, Attrs: []Attr{{Name: "http", Value: "h:2"}}}})
	h.ok(&Request{MemberPut: &MemberPut{ID: 2, Attrs: []Attr{{Name: "http", Value: "x"}}}})
	assert.Equal(t, map[string]string{"http": "h:2", "grpc": "g:1"}, h.s.Member(1), "attributes not named are kept")
	all := h.all()
	require.Len(t, all.Kvs, 1, "a range of every key sees the user's keys alone")
	assert.Equal(t, "\x00edictkv/http/1", string(all.Kvs[0].Key), "any key is a user key, NUL first included")

	h.ok(&Request{MemberDelete: &MemberDelete{ID: 2}})
	assert.Nil(t, h.s.Member(2))
	assert.Equal(t, []uint64{1}, h.s.Members())

	// Carried by a snapshot.
	sn, err := h.s.Snapshot()
	require.NoError(t, err)
	other := newHarness(t)
	other.put("z", "z")
	pr, pw := pipe()
	go func() { pw.CloseWithError(sn.Persist(pw)); sn.Release() }()
	require.NoError(t, other.s.Restore(pr))
	assert.Equal(t, map[string]string{"http": "h:2", "grpc": "g:1"}, other.s.Member(1))
	assert.Nil(t, other.s.Member(2))
	assert.Equal(t, int64(2), other.s.Rev())
	assert.Equal(t, "\x00edictkv/http/1", string(other.all().Kvs[0].Key))

	// Kept across a restart.
	h.reopen(false)
	assert.Equal(t, map[string]string{"http": "h:2", "grpc": "g:1"}, h.s.Member(1))
}

func TestEncodeRefuses(t *testing.T) {
	for _, r := range []*Request{
		{},
		{Put: &pb.PutRequest{}, DeleteRange: &pb.DeleteRangeRequest{}},
		{MemberPut: &MemberPut{ID: 0, Attrs: []Attr{{Name: "a"}}}},
		{MemberPut: &MemberPut{ID: 1}},
		{MemberPut: &MemberPut{ID: 1, Attrs: []Attr{{Name: "a"}, {Name: "a"}}}},
		{Put: &pb.PutRequest{Key: []byte("a")}, User: string(make([]byte, MaxUserBytes+1))},
	} {
		_, err := r.Encode()
		assert.Error(t, err, "%+v", r)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range seedRequests() {
		data, err := r.Encode()
		require.NoError(t, err)
		got, err := DecodeRequest(data)
		require.NoError(t, err)
		again, err := got.Encode()
		require.NoError(t, err)
		assert.Equal(t, data, again)
		assert.Equal(t, r.Kind(), got.Kind())
		assert.Equal(t, r.ID, got.ID)
		assert.Equal(t, r.User, got.User)
	}
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "Txn", KindTxn.String())
	assert.Equal(t, "Kind(99)", Kind(99).String())
	assert.True(t, errors.Is(fmt.Errorf("x: %w", ErrBadRequest), ErrBadRequest))
}

// AwaitRev returns at once for a revision the state is at, waits for one
// it is not at until an entry makes it, and gives up when its context
// ends; an entry that changes nothing leaves it waiting.
func TestAwaitRev(t *testing.T) {
	h := newHarness(t)
	rev := h.put("a", "1").Rev
	ctx := context.Background()
	require.NoError(t, h.s.AwaitRev(ctx, rev))

	done := make(chan error, 1)
	go func() { done <- h.s.AwaitRev(ctx, rev+1) }()
	h.entry(nil) // the log's own entry: no new revision
	select {
	case err := <-done:
		t.Fatalf("AwaitRev(%d) returned %v at revision %d", rev+1, err, h.s.Rev())
	case <-time.After(20 * time.Millisecond):
	}
	h.put("b", "2")
	require.NoError(t, <-done)

	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, h.s.AwaitRev(short, rev+5), context.DeadlineExceeded)
}
