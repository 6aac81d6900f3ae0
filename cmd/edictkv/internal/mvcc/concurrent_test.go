package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReads runs ranges, hashes and snapshots while a writer
// writes and compacts, with the background committer and compactor on.
// Every transaction writes all ten keys with the same value, so a read
// that saw half a transaction would find two values; run it with -race.
func TestConcurrentReads(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			o := Options{Background: true, BatchLimit: 50, CompactionBatchLimit: 7}
			var s *Store
			if kind == "memory" {
				s, _ = newMemStore(t, o)
				defer s.Close()
			} else {
				s, _ = newBoltStore(t, o)
			}
			const rounds = 300
			var done atomic.Bool
			var wg sync.WaitGroup
			errc := make(chan error, 8)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer done.Store(true)
				idx := uint64(0)
				for r := range rounds {
					idx++
					tw, err := s.Write(idx)
					if err != nil {
						errc <- err
						return
					}
					for k := range 10 {
						tw.Put(fmt.Appendf(nil, "k%d", k), fmt.Appendf(nil, "r%d", r), 0, PutOptions{})
					}
					tw.End()
					if r%40 == 39 {
						idx++
						if _, err := s.Compact(idx, s.Rev()-5); err != nil {
							errc <- err
							return
						}
					}
				}
			}()
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !done.Load() {
						rev := s.Rev()
						at := rev - int64(rev%7)
						rr, err := s.Range(context.Background(), []byte("k"), []byte("l"), RangeOptions{Rev: at})
						if errors.Is(err, ErrCompacted) {
							continue
						}
						if err != nil {
							errc <- err
							return
						}
						for _, kv := range rr.KVs {
							if string(kv.Value) != string(rr.KVs[0].Value) || kv.ModRevision != rr.KVs[0].ModRevision {
								errc <- fmt.Errorf("half a transaction at %d: %v", at, rr.KVs)
								return
							}
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					if _, _, err := s.HashByRev(0); err != nil {
						errc <- err
						return
					}
					sn, err := s.Snapshot()
					if err != nil {
						errc <- err
						return
					}
					_, err = sn.WriteTo(io.Discard)
					sn.Close()
					if err != nil {
						errc <- err
						return
					}
				}
			}()
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			if s.Rev() != rounds+1 {
				t.Fatalf("rev %d", s.Rev())
			}
		})
	}
}
