package kvstate

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/fsmtest"
)

// TestConformance runs fsm's DiskFSM suite on the state in a bbolt file.
func TestConformance(t *testing.T) {
	fsmtest.TestDiskFSM(t, fsmtest.Suite{
		Open: func(dir string) (fsm.DiskFSM, io.Closer, error) {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, nil, err
			}
			// The suite reopens a directory expecting exactly the state of
			// the last Sync, whether the machine crashed or was closed (the
			// contract lets a Close lose what was not synced): its Closer
			// here closes the file under the store, as a crash would,
			// leaving the store's pending batch uncommitted, and no batch
			// commits on its own in between.
			be, err := backend.OpenBolt(filepath.Join(dir, "state.db"), backend.BoltOptions{InitialMmapSize: 1 << 20})
			if err != nil {
				return nil, nil, err
			}
			s, err := Open(be, Options{Store: mvcc.Options{BatchLimit: 1 << 30}})
			if err != nil {
				be.Close()
				return nil, nil, err
			}
			return s, be, nil
		},
		Command:           conformanceCommand,
		State:             describe,
		DetectsCorruption: true,
	})
}

// conformanceCommand draws a request of every kind that changes the state.
func conformanceCommand(r *rand.Rand) []byte {
	k := []byte{byte('a' + r.IntN(6))}
	var req *Request
	switch r.IntN(8) {
	case 0, 1, 2:
		req = &Request{Put: &pb.PutRequest{Key: k, Value: []byte(fmt.Sprint(r.IntN(1000)))}}
	case 3:
		req = &Request{DeleteRange: &pb.DeleteRangeRequest{Key: k, RangeEnd: []byte{k[0] + 2}}}
	case 4:
		req = &Request{Txn: &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: k, Target: pb.Compare_VERSION, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{Version: 1}}},
			Success: []*pb.RequestOp{putOp("t", "s")}, Failure: []*pb.RequestOp{putOp("t", "f"), delOp("a", "")}}}
	case 5:
		req = &Request{MemberPut: &MemberPut{ID: uint64(1 + r.IntN(3)), Attrs: []Attr{{Name: "http", Value: fmt.Sprint(r.IntN(100))}}}}
	case 6:
		// Compaction at a revision a little behind; some are refused,
		// which records the index all the same.
		req = &Request{Compaction: &pb.CompactionRequest{Revision: int64(r.IntN(40))}}
	default:
		req = &Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_AlarmAction(1 + r.IntN(2)), MemberID: 1, Alarm: pb.AlarmType_NOSPACE}}
	}
	data, err := req.Encode()
	if err != nil {
		panic(err)
	}
	return data
}

// describe is everything a client can read of a state: revisions, every
// key at every revision kept, the system namespace, the stamps.
func describe(f fsm.DiskFSM) ([]byte, error) {
	s := f.(*State)
	out := binary.AppendVarint(nil, s.Rev())
	out = binary.AppendVarint(out, s.CompactRev())
	for rev := max(s.CompactRev(), 1); rev <= s.Rev(); rev++ {
		resp, st, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
		if err != nil {
			return nil, err
		}
		b, err := resp.Marshal()
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		out = fmt.Appendf(out, "%v", st)
	}
	for _, id := range s.Members() {
		out = fmt.Appendf(out, "member %d %v", id, s.Member(id))
	}
	out = fmt.Appendf(out, "alarms %v", s.Alarms(pb.AlarmType_NONE))
	return out, nil
}
