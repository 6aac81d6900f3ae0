package mvcc

import (
	"context"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// newMemStore opens a manual store on a fresh memory backend.
func newMemStore(t testing.TB, o Options) (*Store, *backend.Memory) {
	t.Helper()
	m := backend.NewMemory()
	s, err := Open(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func newBoltStore(t testing.TB, o Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mvcc.db")
	s, err := OpenFile(path, testBoltOptions, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// testBoltOptions keep test files small in address space and fsync-free:
// the tests about crashes use the memory backend or close the file.
var testBoltOptions = backend.BoltOptions{InitialMmapSize: 1 << 20, NoSync: true}

// txn runs fn in a write transaction at index and ends it.
func txn(t testing.TB, s *Store, index uint64, fn func(tw *TxnWrite)) int64 {
	t.Helper()
	tw, err := s.Write(index)
	if err != nil {
		t.Fatal(err)
	}
	fn(tw)
	return tw.End()
}

func put(t testing.TB, s *Store, index uint64, key, value string) int64 {
	t.Helper()
	return txn(t, s, index, func(tw *TxnWrite) {
		if _, err := tw.Put([]byte(key), []byte(value), 0, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func del(t testing.TB, s *Store, index uint64, key, end string) int64 {
	t.Helper()
	var e []byte
	if end != "" {
		e = []byte(end)
	}
	return txn(t, s, index, func(tw *TxnWrite) {
		if _, err := tw.DeleteRange(context.Background(), []byte(key), e, false); err != nil {
			t.Fatal(err)
		}
	})
}

func get(t testing.TB, s *Store, key string, rev int64) *mvccpb.KeyValue {
	t.Helper()
	rr, err := s.Range(context.Background(), []byte(key), nil, RangeOptions{Rev: rev})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.KVs) == 0 {
		return nil
	}
	return rr.KVs[0]
}

// abandon models a crash of a store on a file: it stops the store and
// closes the file without committing what is pending.
func (s *Store) abandon() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.wmu.Lock()
	s.closed = true
	s.wmu.Unlock()
	s.be.Close()
}
