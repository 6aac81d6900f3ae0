package mvcc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// received is a response with the follower's revisions when it came.
type received struct {
	resp         WatchResponse
	rev, compact int64
}

// TestWatchConcurrent runs TestWatchModel's leader and follower with the
// background goroutines (commits, compaction, watch steps) while reader
// goroutines open watchers at past, current and future revisions, read
// them at their own paces (one stream not at all until the writes end),
// cancel some and ask for progress. Every response is recorded with the
// follower's revisions when it came and checked against the model once the
// writes end, then every watcher must catch up. Run it with -race.
func TestWatchConcurrent(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed^0x636f6e63))
			r := &watchRun{t: t, rng: rng, seed: seed, kind: "memory", m: &wmodel{states: []map[string]mkv{nil, {}}, events: [][]mevent{nil, nil}, compact: -1}}
			r.opts = Options{Background: true, BatchLimit: 50, CompactionBatchLimit: 5, WatchBuffer: 4, WatchBatchLimit: 16}
			r.lead = r.open("lead.db")
			r.f = r.open("follower.db")
			defer r.lead.Close()
			defer r.f.Close()

			const readers = 5
			var done atomic.Bool
			stop := make(chan struct{})
			var wg sync.WaitGroup
			got := make([][]received, readers)
			errs := make(chan error, readers)
			for g := range readers {
				st := &wstream{ws: r.f.NewWatchStream(), watchers: map[WatchID]*wwatcher{}, nextID: 1000}
				r.streams = append(r.streams, st)
				stuck := g == 0
				grng := rand.New(rand.NewPCG(seed, uint64(g)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !done.Load() {
						if len(st.watchers) < 12 && grng.IntN(4) == 0 {
							key, end := watchKeys[grng.IntN(len(watchKeys))], ""
							if grng.IntN(2) == 0 {
								end = "\x00"
							}
							cur := r.f.Rev()
							start := max(1, cur-grng.Int64N(12))
							if grng.IntN(3) == 0 {
								start = cur + 1 + grng.Int64N(4)
							}
							o := WatchOption(grng.IntN(8))
							id, err := st.ws.Watch(AutoWatchID, []byte(key), bytesOrNil(end), start, o)
							if err != nil {
								errs <- err
								return
							}
							st.watchers[id] = &wwatcher{id: id, key: key, end: end, opts: o, start: start, next: start}
						}
						if grng.IntN(50) == 0 {
							for id, w := range st.watchers {
								if !w.cancelled {
									st.ws.Cancel(id)
									w.cancelled = true
									break
								}
							}
						}
						if grng.IntN(30) == 0 {
							var ids []WatchID
							for id, w := range st.watchers {
								if !w.cancelled {
									ids = append(ids, id)
								}
							}
							if st.ws.RequestProgressAll() && len(ids) > 0 {
								st.allProgress = append(st.allProgress, ids)
							}
						}
						if stuck {
							select {
							case <-stop:
							case <-time.After(time.Millisecond):
							}
							continue
						}
						// Wait for a response (or the end), then take a few more.
						select {
						case resp := <-st.ws.Chan():
							got[g] = append(got[g], received{resp, r.f.Rev(), r.f.CompactRev()})
						case <-stop:
							continue
						case <-time.After(time.Millisecond):
						}
						for range grng.IntN(8) {
							select {
							case resp := <-st.ws.Chan():
								got[g] = append(got[g], received{resp, r.f.Rev(), r.f.CompactRev()})
							default:
							}
						}
						if g%2 == 1 && grng.IntN(4) == 0 {
							time.Sleep(time.Duration(grng.IntN(500)) * time.Microsecond)
						}
					}
				}()
			}

			for r.step = 0; r.step < 3000; r.step++ {
				switch x := r.rng.IntN(100); {
				case x < 45:
					r.leadOne()
				case x < 98:
					r.followOne()
				default:
					if r.fIndex < len(r.log) {
						r.restore()
					}
				}
				if r.step%100 == 0 {
					r.checkBound()
				}
				if r.step%4 == 0 {
					runtime.Gosched()
				}
			}
			for r.fIndex < len(r.log) {
				r.followOne()
			}
			done.Store(true)
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if st := r.f.WatchStats(); st.Parked > st.Watchers {
				t.Fatalf("%d responses parked for %d watchers", st.Parked, st.Watchers)
			}
			r.maxCompact = r.f.CompactRev()
			for g, st := range r.streams {
				for _, x := range got[g] {
					r.checkResponse(st, x.resp, x.rev, x.compact)
				}
			}
			r.finish()
		})
	}
}
