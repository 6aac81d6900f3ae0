package kvservice_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

const testQuota = 1 << 20

// quotaService is a service whose backend size the test sets.
func quotaService(t *testing.T, bytes int64) (*kvservice.Service, *fakelog.Log, *atomic.Int64) {
	t.Helper()
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	size := new(atomic.Int64)
	s, err := kvservice.New(kvservice.Config{Log: fl, State: fl.State,
		Quota: kvservice.Quota{Bytes: bytes, Size: size.Load, MemberID: 7}})
	require.NoError(t, err)
	return s, fl, size
}

func putOp(k, v string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

// alarmRequests are the alarm changes proposed (lists go through the log
// too).
func alarmRequests(fl *fakelog.Log) []*pb.AlarmRequest {
	var out []*pb.AlarmRequest
	for _, a := range fl.Applied() {
		if a.Req.Alarm != nil && a.Req.Alarm.Action != pb.AlarmRequest_GET {
			out = append(out, a.Req.Alarm)
		}
	}
	return out
}

// The cost of a request is etcd's (256 bytes of metadata beside each
// put's key and value; a txn's dearer branch), and a write passes while
// the backend's size plus its cost is under the quota: the request that
// would reach it is refused, before anything is proposed.
func TestQuotaCost(t *testing.T) {
	ctx := context.Background()
	txn := &pb.TxnRequest{
		Success: []*pb.RequestOp{putOp("a", "12345"), putOp("b", "")},
		Failure: []*pb.RequestOp{putOp("c", "1"), {Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
			Success: []*pb.RequestOp{putOp("dd", "123456789")},
			Failure: []*pb.RequestOp{putOp("e", "")},
		}}}},
	}
	for _, c := range []struct {
		name  string
		write func(*kvservice.Service) error
		cost  int64
	}{
		{"put", func(s *kvservice.Service) error {
			_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("key"), Value: []byte("value")})
			return err
		}, 256 + 3 + 5},
		{"txn: the dearer branch, nested txns counted", func(s *kvservice.Service) error {
			_, _, err := s.Txn(ctx, txn)
			return err
		}, max(256+1+5+256+1, 256+1+1+(256+2+9))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, fl, size := quotaService(t, testQuota)
			size.Store(testQuota - c.cost - 1)
			require.NoError(t, c.write(s), "one byte under the quota")
			size.Store(testQuota - c.cost)
			err := c.write(s)
			require.ErrorIs(t, err, kvservice.ErrNoSpace, "at the quota")
			assert.Len(t, fl.Applied(), 2, "the write, then the alarm: the refused write was not proposed")
		})
	}
}

// Over the quota: the NOSPACE alarm for this member is proposed once
// however many writes are refused; the state then refuses puts even
// under the quota, while deletes, txns without puts and compactions go
// on; deactivating the alarm once there is room lets writes in again.
func TestQuotaAlarm(t *testing.T) {
	ctx := context.Background()
	s, fl, size := quotaService(t, testQuota)
	put := func(k string) error {
		_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v")})
		return err
	}
	require.NoError(t, put("a"))
	require.NoError(t, put("b"))
	size.Store(testQuota)
	for range 3 {
		assert.ErrorIs(t, put("c"), kvservice.ErrNoSpace)
		_, _, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putOp("c", "v")}})
		assert.ErrorIs(t, err, kvservice.ErrNoSpace)
	}
	alarms := alarmRequests(fl)
	require.Len(t, alarms, 1, "the alarm is proposed once")
	assert.Equal(t, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 7, Alarm: pb.AlarmType_NOSPACE}, alarms[0])
	assert.Equal(t, []*pb.AlarmMember{{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}}, s.Alarms())
	list, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	require.NoError(t, err)
	assert.Equal(t, []*pb.AlarmMember{{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}}, list.Alarms, "alarm list")

	// What frees space goes on.
	_, _, err = s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a")}}}}})
	assert.NoError(t, err, "a txn that puts nothing")
	_, _, err = s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	_, err = s.Compact(ctx, &pb.CompactionRequest{Revision: s.Rev(), Physical: true})
	require.NoError(t, err)

	// Room again (a defragmentation), but the alarm holds: the state
	// refuses puts until it is deactivated.
	size.Store(0)
	assert.ErrorIs(t, put("c"), kvservice.ErrNoSpace, "the state's capped applier")
	assert.Len(t, alarmRequests(fl), 1, "under the quota, no alarm is proposed")
	_, err = s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: 7, Alarm: pb.AlarmType_NOSPACE})
	require.NoError(t, err)
	assert.Empty(t, s.Alarms())
	require.NoError(t, put("c"))

	// Over the quota again: a new alarm.
	size.Store(testQuota)
	assert.ErrorIs(t, put("d"), kvservice.ErrNoSpace)
	assert.Len(t, alarmRequests(fl), 3, "activate, deactivate, activate")
	assert.Len(t, s.Alarms(), 1)
}

// An alarm proposal that fails does not change the refusal, and the next
// write over the quota proposes it again; another member's NOSPACE does
// not stand for this one's.
func TestQuotaAlarmRetried(t *testing.T) {
	ctx := context.Background()
	s, fl, size := quotaService(t, testQuota)
	_, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 9, Alarm: pb.AlarmType_NOSPACE})
	require.NoError(t, err)
	size.Store(testQuota)
	fl.FailApply(edictlog.ErrNotCommitted)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	assert.ErrorIs(t, err, kvservice.ErrNoSpace)
	assert.Len(t, alarmRequests(fl), 1, "member 9's only")
	fl.FailApply(nil)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	assert.ErrorIs(t, err, kvservice.ErrNoSpace)
	assert.Len(t, alarmRequests(fl), 2)
	assert.ElementsMatch(t, []*pb.AlarmMember{{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}, {MemberID: 9, Alarm: pb.AlarmType_NOSPACE}}, s.Alarms())
}

// A negative quota turns it off, as etcd's; 0 is etcd's default, 2 GiB.
func TestQuotaOff(t *testing.T) {
	ctx := context.Background()
	s, fl, size := quotaService(t, -1)
	size.Store(1 << 40)
	_, _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	require.NoError(t, err)
	assert.Empty(t, alarmRequests(fl))

	s, _, size = quotaService(t, 0)
	assert.Equal(t, kvservice.DefaultQuotaBytes, s.QuotaBytes())
	size.Store(kvservice.DefaultQuotaBytes - 300)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	require.NoError(t, err)
	size.Store(kvservice.DefaultQuotaBytes - 200)
	_, _, err = s.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	require.True(t, errors.Is(err, kvservice.ErrNoSpace), "%v", err)
}
