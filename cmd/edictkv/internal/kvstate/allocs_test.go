package kvstate

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/fsm"
)

// maxRangeAllocs bounds the allocations of the etcd API's read of one key
// (RangeUnstamped) from a committed bbolt file: the view and its share of
// the read transaction, the index search, bbolt's cursor, the decoded
// pair (its key and value are copied once, out of the file's mapping)
// and the response. It was 40 when every read opened a bbolt transaction
// of its own and read the stamps too.
const maxRangeAllocs = 18

func TestRangeUnstampedAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations")
	}
	s, err := OpenFile(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data, at := putTemplate(t)
	for i := range uint64(100) {
		binary.BigEndian.PutUint64(data[at:at+8], i)
		if res := s.Apply(fsm.Entry{Index: i + 1, Stamp: stampAt(i + 1), Data: data}).(*Result); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	r := &pb.RangeRequest{Key: binary.BigEndian.AppendUint64(nil, 50)}
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		resp, err := s.RangeUnstamped(ctx, r)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("range: %v", err)
		}
	})
	if n > maxRangeAllocs {
		t.Fatalf("a read of one key allocates %.1f times, over the bound of %d", n, maxRangeAllocs)
	}
	t.Logf("%.1f allocations", n)
}
