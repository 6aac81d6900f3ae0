package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// drain returns what the stream's channel holds now, without waiting.
func drain(ws *WatchStream) []WatchResponse {
	var out []WatchResponse
	for {
		select {
		case r, ok := <-ws.Chan():
			if !ok {
				return out
			}
			out = append(out, r)
		default:
			return out
		}
	}
}

// steps runs WatchStep until no work remains (at most n times).
func steps(t testing.TB, s *Store, n int) {
	t.Helper()
	for range n {
		more, err := s.WatchStep()
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
	}
}

// evString is an event as "PUT k=v@mod" or "DELETE k@mod", with its
// previous value when it has one.
func evString(e mvccpb.Event) string {
	var s string
	if e.Type == mvccpb.DELETE {
		s = fmt.Sprintf("DELETE %s@%d", e.Kv.Key, e.Kv.ModRevision)
	} else {
		s = fmt.Sprintf("PUT %s=%s@%d", e.Kv.Key, e.Kv.Value, e.Kv.ModRevision)
	}
	if e.PrevKv != nil {
		s += fmt.Sprintf(" prev %s@%d", e.PrevKv.Value, e.PrevKv.ModRevision)
	}
	return s
}

func events(rs []WatchResponse, id WatchID) []string {
	var out []string
	for _, r := range rs {
		if r.WatchID != id {
			continue
		}
		for _, e := range r.Events {
			out = append(out, evString(e))
		}
	}
	return out
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

func TestWatchSyncedAndHistory(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	defer s.Close()
	put(t, s, 1, "a", "1")   // 2
	put(t, s, 2, "b", "1")   // 3
	put(t, s, 3, "a", "2")   // 4
	del(t, s, 4, "a", "")    // 5
	put(t, s, 5, "a/x", "1") // 6
	ws := s.NewWatchStream()
	defer ws.Close()

	now, err := ws.Watch(AutoWatchID, []byte("a"), nil, 0)
	if err != nil || now != 0 {
		t.Fatalf("watch: %d, %v", now, err)
	}
	past, _ := ws.Watch(AutoWatchID, []byte("a"), nil, 2, WatchPrevKV)
	prefix, _ := ws.Watch(AutoWatchID, []byte("a"), []byte("b"), 3)
	future, _ := ws.Watch(AutoWatchID, []byte("a"), []byte{0}, 9)
	noDel, _ := ws.Watch(100, []byte("a"), nil, 1, WatchNoDelete)
	if past != 1 || prefix != 2 || future != 3 || noDel != 100 {
		t.Fatalf("ids %d %d %d %d", past, prefix, future, noDel)
	}
	if st := s.WatchStats(); st.Unsynced != 3 || st.Synced != 2 {
		t.Fatalf("stats %+v", st)
	}
	steps(t, s, 10)
	if st := s.WatchStats(); st.Unsynced != 0 || st.Synced != 5 {
		t.Fatalf("stats after catching up %+v", st)
	}
	put(t, s, 6, "a", "3")  // 7
	put(t, s, 7, "ab", "1") // 8
	put(t, s, 8, "a", "4")  // 9
	put(t, s, 9, "b", "2")  // 10
	rs := drain(ws)
	sameStrings(t, "from now", events(rs, now), []string{"PUT a=3@7", "PUT a=4@9"})
	sameStrings(t, "from 2 with prev", events(rs, past), []string{
		"PUT a=1@2", "PUT a=2@4 prev 1@2", "DELETE a@5 prev 2@4", "PUT a=3@7", "PUT a=4@9 prev 3@7"})
	sameStrings(t, "prefix from 3", events(rs, prefix), []string{"PUT a=2@4", "DELETE a@5", "PUT a/x=1@6", "PUT a=3@7", "PUT ab=1@8", "PUT a=4@9"})
	sameStrings(t, "future from 9", events(rs, future), []string{"PUT a=4@9", "PUT b=2@10"})
	sameStrings(t, "no delete", events(rs, noDel), []string{"PUT a=1@2", "PUT a=2@4", "PUT a=3@7", "PUT a=4@9"})
	for _, r := range rs {
		if last := r.Events[len(r.Events)-1].Kv.ModRevision; r.Revision < last {
			t.Fatalf("response revision %d below its last event's %d", r.Revision, last)
		}
	}
}

func TestWatchIDsAndErrors(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	defer s.Close()
	ws := s.NewWatchStream()
	if id, err := ws.Watch(1, []byte("k"), nil, 0); err != nil || id != 1 {
		t.Fatalf("watch 1: %d %v", id, err)
	}
	if _, err := ws.Watch(1, []byte("k"), nil, 0); !errors.Is(err, ErrWatcherDuplicateID) {
		t.Fatalf("duplicate: %v", err)
	}
	if id, _ := ws.Watch(AutoWatchID, []byte("k"), nil, 0); id != 0 {
		t.Fatalf("first auto id %d", id)
	}
	if id, _ := ws.Watch(AutoWatchID, []byte("k"), nil, 0); id != 2 {
		t.Fatalf("auto id after 0 and 1: %d", id)
	}
	if _, err := ws.Watch(AutoWatchID, []byte("b"), []byte("a"), 0); !errors.Is(err, ErrEmptyWatcherRange) {
		t.Fatalf("empty range: %v", err)
	}
	if _, err := ws.Watch(-1, []byte("b"), nil, 0); !errors.Is(err, ErrWatchID) {
		t.Fatalf("negative id: %v", err)
	}
	if _, err := ws.Watch(7, []byte("b"), nil, -3); !errors.Is(err, ErrWatchStartRev) {
		t.Fatalf("negative start: %v", err)
	}
	if err := ws.Cancel(1); err != nil {
		t.Fatal(err)
	}
	if err := ws.Cancel(1); !errors.Is(err, ErrWatcherNotExist) {
		t.Fatalf("second cancel: %v", err)
	}
	if id, err := ws.Watch(1, []byte("k"), nil, 0); err != nil || id != 1 {
		t.Fatalf("id 1 again after cancel: %d %v", id, err)
	}
	put(t, s, 1, "k", "v")
	if got := len(drain(ws)); got != 3 {
		t.Fatalf("%d responses for 3 watchers of k", got)
	}
	ws.Close()
	if _, ok := <-ws.Chan(); ok {
		t.Fatal("channel open after Close")
	}
	if _, err := ws.Watch(AutoWatchID, []byte("k"), nil, 0); !errors.Is(err, ErrWatchStreamClosed) {
		t.Fatalf("watch on a closed stream: %v", err)
	}
	put(t, s, 2, "k", "v")
	if st := s.WatchStats(); st.Watchers != 0 || st.Streams != 0 {
		t.Fatalf("stats after close %+v", st)
	}
	ws2 := s.NewWatchStream()
	id, _ := ws2.Watch(AutoWatchID, []byte("k"), nil, 0)
	s.Close()
	if _, ok := <-ws2.Chan(); ok {
		t.Fatal("channel open after the store's Close")
	}
	if err := ws2.Cancel(id); !errors.Is(err, ErrWatcherNotExist) {
		t.Fatalf("cancel after the store's Close: %v", err)
	}
	if _, err := ws2.Watch(AutoWatchID, []byte("k"), nil, 0); err == nil {
		t.Fatal("watch on a closed store")
	}
	ws2.Close()
	if st := s.WatchStats(); st.Watchers != 0 || st.Streams != 0 {
		t.Fatalf("stats after the store's close %+v", st)
	}
}

func TestWatchCompactionCancels(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	defer s.Close()
	for i := range 6 {
		put(t, s, uint64(i+1), "k", fmt.Sprint(i)) // revisions 2..7
	}
	if _, err := s.Compact(7, 5); err != nil {
		t.Fatal(err)
	}
	for {
		if more, err := s.CompactStep(); err != nil || !more {
			break
		}
	}
	ws := s.NewWatchStream()
	defer ws.Close()
	gone, _ := ws.Watch(5, []byte("k"), nil, 4)
	at, _ := ws.Watch(AutoWatchID, []byte("k"), nil, 5, WatchPrevKV)
	steps(t, s, 10)
	rs := drain(ws)
	var cancel *WatchResponse
	for i := range rs {
		if rs[i].WatchID == gone {
			cancel = &rs[i]
		}
	}
	if cancel == nil || cancel.CompactRevision != 5 || len(cancel.Events) != 0 {
		t.Fatalf("watcher from 4 after a compaction at 5: %+v", rs)
	}
	// From the compaction revision: its event, without prev_kv (compacted).
	sameStrings(t, "from the compaction revision", events(rs, at), []string{"PUT k=3@5", "PUT k=4@6 prev 3@5", "PUT k=5@7 prev 4@6"})
	if st := s.WatchStats(); st.Compacted != 1 || st.EventsSent != 3 || st.Watchers != 1 {
		t.Fatalf("counts after one compaction cancel and three events: %+v", st)
	}
	if err := ws.Cancel(gone); !errors.Is(err, ErrWatcherNotExist) {
		t.Fatalf("cancel of a compacted watcher: %v", err)
	}
	if id, err := ws.Watch(gone, []byte("k"), nil, 0); err != nil || id != gone {
		t.Fatalf("the compacted watcher's id again: %d %v", id, err)
	}
}

// TestWatchCompactionRevisionKeepsItsChanges: a key changed twice in the
// compaction revision keeps both changes for a watcher from there, after
// the physical compaction too.
func TestWatchCompactionRevisionKeepsItsChanges(t *testing.T) {
	s, _ := newMemStore(t, Options{CompactionBatchLimit: 1})
	defer s.Close()
	put(t, s, 1, "k", "0")            // 2
	txn(t, s, 2, func(tw *TxnWrite) { // 3
		tw.Put([]byte("k"), []byte("1"), 0, PutOptions{})
		tw.DeleteRange(context.Background(), []byte("k"), nil, false)
		tw.Put([]byte("k"), []byte("2"), 0, PutOptions{})
	})
	put(t, s, 3, "k", "3") // 4
	if _, err := s.Compact(4, 3); err != nil {
		t.Fatal(err)
	}
	for {
		if more, err := s.CompactStep(); err != nil || !more {
			break
		}
	}
	ws := s.NewWatchStream()
	defer ws.Close()
	id, _ := ws.Watch(AutoWatchID, []byte("k"), nil, 3, WatchPrevKV)
	steps(t, s, 10)
	sameStrings(t, "from the compaction revision", events(drain(ws), id), []string{
		"PUT k=1@3", "DELETE k@3 prev 1@3", "PUT k=2@3", "PUT k=3@4 prev 2@3"})
}

func TestWatchProgress(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	defer s.Close()
	put(t, s, 1, "a", "1") // 2
	put(t, s, 2, "a", "2") // 3
	ws := s.NewWatchStream()
	defer ws.Close()
	if !ws.RequestProgressAll() || len(drain(ws)) != 0 {
		t.Fatal("progress of a stream without watchers: true, and nothing sent (etcd's)")
	}
	syncedID, _ := ws.Watch(AutoWatchID, []byte("a"), nil, 0)
	pastID, _ := ws.Watch(AutoWatchID, []byte("a"), nil, 2)
	futureID, _ := ws.Watch(AutoWatchID, []byte("b"), nil, 10)
	if !ws.RequestProgress(syncedID) {
		t.Fatal("no progress for a synced watcher")
	}
	if ws.RequestProgress(pastID) || ws.RequestProgress(futureID) || ws.RequestProgressAll() {
		t.Fatal("progress for a watcher catching up or waiting for a future revision")
	}
	if rs := drain(ws); len(rs) != 1 || rs[0].WatchID != syncedID || rs[0].Revision != 3 || len(rs[0].Events) != 0 {
		t.Fatalf("progress responses %+v", rs)
	}
	steps(t, s, 10)
	drain(ws)
	if !ws.RequestProgress(pastID) {
		t.Fatal("no progress once caught up")
	}
	ws.Cancel(futureID)
	if !ws.RequestProgressAll() {
		t.Fatal("no progress for all once every watcher is synced")
	}
	rs := drain(ws)
	if len(rs) != 2 || rs[1].WatchID != AllWatchers || rs[1].Revision != 3 {
		t.Fatalf("progress responses %+v", rs)
	}
	if ws.Rev() != 3 {
		t.Fatalf("stream revision %d", ws.Rev())
	}
}

// TestWatchParkedThenCaughtUp: a stream whose channel is full parks one
// response per watcher, writes go on, and once it is read its watchers
// catch up from history with nothing lost or repeated.
func TestWatchParkedThenCaughtUp(t *testing.T) {
	s, _ := newMemStore(t, Options{WatchBuffer: 2, WatchBatchLimit: 3})
	defer s.Close()
	slow := s.NewWatchStream()
	defer slow.Close()
	fast := s.NewWatchStream()
	defer fast.Close()
	const keys = 5
	for k := range keys {
		slow.Watch(AutoWatchID, fmt.Appendf(nil, "k%d", k), nil, 0)
	}
	fastID, _ := fast.Watch(AutoWatchID, []byte("k"), []byte("l"), 0)
	var got []string
	want := map[WatchID][]string{}
	for i := range 40 {
		k := i % keys
		rev := put(t, s, uint64(i+1), fmt.Sprintf("k%d", k), fmt.Sprint(i))
		want[WatchID(k)] = append(want[WatchID(k)], fmt.Sprintf("PUT k%d=%d@%d", k, i, rev))
		got = append(got, events(drain(fast), fastID)...)
		if i%7 == 0 {
			steps(t, s, 1)
		}
		st := s.WatchStats()
		if st.Parked > keys || st.ParkedEvents > keys {
			t.Fatalf("after put %d: %d responses with %d events parked, bound %d", i, st.Parked, st.ParkedEvents, keys)
		}
	}
	if len(got) != 40 {
		t.Fatalf("the fast stream got %d events of 40", len(got))
	}
	if st := s.WatchStats(); st.Parked == 0 {
		t.Fatalf("nothing parked on a stream never read: %+v", st)
	}
	var rs []WatchResponse
	for range 100 {
		rs = append(rs, drain(slow)...)
		if more, err := s.WatchStep(); err != nil {
			t.Fatal(err)
		} else if !more {
			break
		}
	}
	rs = append(rs, drain(slow)...)
	for k := range keys {
		sameStrings(t, fmt.Sprintf("slow watcher of k%d", k), events(rs, WatchID(k)), want[WatchID(k)])
	}
	if st := s.WatchStats(); st.Synced != keys+1 || st.Parked != 0 || st.Unsynced != 0 {
		t.Fatalf("stats after catching up %+v", st)
	}
}

func TestWatchGroupMatches(t *testing.T) {
	var g watcherGroup
	type spec struct{ key, end string }
	specs := []spec{{"a", ""}, {"a", "b"}, {"a", "\x00"}, {"ab", "ac"}, {"b", ""}, {"a", "b"}, {"\x00", "\x00"}, {"c", "d"}, {"aa", "ab"}}
	var ws []*watcher
	for i, sp := range specs {
		k, e := normalizeRange([]byte(sp.key), bytesOrNil(sp.end))
		w := &watcher{seq: uint64(i + 1), key: k, end: e}
		ws = append(ws, w)
		g.add(w)
	}
	check := func(removed map[int]bool) {
		t.Helper()
		for _, key := range []string{"a", "aa", "ab", "abc", "ac", "b", "c", "cc", "d", "\x00", "zz"} {
			var want []int
			for i, sp := range specs {
				if !removed[i] && inRange(key, sp.key, sp.end) {
					want = append(want, i)
				}
			}
			var got []int
			for _, w := range g.appendMatches(nil, []byte(key)) {
				got = append(got, int(w.seq-1))
			}
			if fmt.Sprint(sortedInts(got)) != fmt.Sprint(want) {
				t.Fatalf("key %q: watchers %v, want %v (removed %v)", key, got, want, removed)
			}
		}
	}
	check(nil)
	removed := map[int]bool{}
	for _, i := range []int{1, 3, 0, 6, 5} {
		if !g.remove(ws[i]) || g.remove(ws[i]) {
			t.Fatalf("remove %d", i)
		}
		removed[i] = true
		check(removed)
	}
	if g.size != len(specs)-len(removed) {
		t.Fatalf("size %d", g.size)
	}
}

func sortedInts(xs []int) []int {
	out := append([]int(nil), xs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestStoredKey(t *testing.T) {
	for _, kv := range []*mvccpb.KeyValue{
		{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: 3, Version: 2},
		{Key: bytes.Repeat([]byte("x"), 300)},
		{Key: []byte{0}},
	} {
		data, err := kv.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		k, ok := storedKey(data)
		if !ok || !bytes.Equal(k, kv.Key) {
			t.Fatalf("storedKey of %v: %q %v", kv, k, ok)
		}
	}
	for _, bad := range [][]byte{nil, {0x0a}, {0x0a, 5, 'a'}, {0x10, 1}, {0x0a, 0xff}} {
		if _, ok := storedKey(bad); ok {
			t.Fatalf("storedKey accepted %x", bad)
		}
	}
}

// TestWatchStuckStream: among 1,000 watchers of single keys and 10
// prefixes on ten streams, the stream of 100 of them is never read while
// 5,000 puts are applied. Every put completes; every watcher of the other
// streams gets each of its events, in order, and a progress at the
// store's revision; the stuck stream holds at most its channel's
// responses and one parked response per watcher, each of one event. Once
// read, its watchers catch up from history with nothing lost or repeated.
// Counts, not clocks: manually stepped, then with the background loop.
func TestWatchStuckStream(t *testing.T) {
	for _, mode := range []string{"manual", "background"} {
		t.Run(mode, func(t *testing.T) {
			const (
				streams = 10
				perKey  = 100 // single-key watchers per stream
				puts    = 5000
				buffer  = 8
			)
			s, _ := newMemStore(t, Options{Background: mode == "background", WatchBuffer: buffer, WatchBatchLimit: 64})
			defer s.Close()
			key := func(i int) string { return fmt.Sprintf("p%d/k%03d", i%10, i) }
			var wss []*WatchStream
			for range streams {
				wss = append(wss, s.NewWatchStream())
			}
			// Stream j watches keys j*100 .. j*100+99, and prefix p<j>/.
			for j, ws := range wss {
				for i := j * perKey; i < (j+1)*perKey; i++ {
					if _, err := ws.Watch(WatchID(i), []byte(key(i)), nil, 0); err != nil {
						t.Fatal(err)
					}
				}
				p := fmt.Sprintf("p%d/", j)
				if _, err := ws.Watch(5000, []byte(p), []byte(fmt.Sprintf("p%d0", j)), 0); err != nil {
					t.Fatal(err)
				}
			}
			stuck := wss[0]
			type seen struct{ last, count int64 }
			got := make([]map[WatchID]*seen, streams)
			var received atomic.Int64
			check := func(j int, r WatchResponse) {
				if got[j] == nil {
					got[j] = map[WatchID]*seen{}
				}
				sn := got[j][r.WatchID]
				if sn == nil {
					sn = &seen{}
					got[j][r.WatchID] = sn
				}
				for _, e := range r.Events {
					if e.Kv.ModRevision <= sn.last {
						t.Fatalf("stream %d watcher %d: revision %d after %d", j, r.WatchID, e.Kv.ModRevision, sn.last)
					}
					if r.WatchID < 5000 && string(e.Kv.Key) != key(int(r.WatchID)) {
						t.Fatalf("watcher %d got key %s", r.WatchID, e.Kv.Key)
					}
					sn.last = e.Kv.ModRevision
					sn.count++
				}
				received.Add(int64(len(r.Events)))
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			if mode == "background" {
				for j := 1; j < streams; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							select {
							case r := <-wss[j].Chan():
								check(j, r)
							case <-stop:
								return
							}
						}
					}()
				}
			}
			maxParked, maxEvents := 0, 0
			for n := range puts {
				i := (n * 7) % (streams * perKey)
				put(t, s, uint64(n+1), key(i), fmt.Sprint(n))
				if mode == "manual" {
					for j := 1; j < streams; j++ {
						for _, r := range drain(wss[j]) {
							check(j, r)
						}
					}
					if n%50 == 0 {
						steps(t, s, 1)
					}
				}
				// A read stream may park too, when its reader falls behind
				// in the background; the stuck one parks one put each.
				st := s.WatchStats()
				s.watch.mu.Lock()
				stuckParked, stuckEvents := len(stuck.parked), 0
				for _, p := range stuck.parked {
					stuckEvents += len(p.resp.Events)
				}
				s.watch.mu.Unlock()
				maxParked, maxEvents = max(maxParked, stuckParked), max(maxEvents, stuckEvents)
				if stuckParked > perKey+1 || stuckEvents > perKey+1 {
					t.Fatalf("after put %d: %d responses with %d events parked on the stuck stream of %d watchers", n, stuckParked, stuckEvents, perKey+1)
				}
				if st.Parked > st.Watchers || st.ParkedEvents > st.Parked*(64+1) {
					t.Fatalf("after put %d: %d responses with %d events parked for %d watchers", n, st.Parked, st.ParkedEvents, st.Watchers)
				}
				if len(stuck.ch) > buffer {
					t.Fatalf("stuck channel holds %d", len(stuck.ch))
				}
			}
			rev := s.Rev()
			if rev != puts+1 {
				t.Fatalf("revision %d after %d puts", rev, puts)
			}
			if maxParked == 0 {
				t.Fatal("nothing parked for a stream never read")
			}
			// The readers have everything: in the background, wait for it
			// by counts (the deadline only turns a hang into a failure).
			want := puts / (streams * perKey)
			deadline := time.Now().Add(time.Minute)
			for mode == "background" && received.Load() < int64((streams-1)*2*perKey*want) {
				if time.Now().After(deadline) {
					t.Fatalf("the read streams got %d events of %d", received.Load(), (streams-1)*2*perKey*want)
				}
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			for j := 1; j < streams; j++ {
				for i := j * perKey; i < (j+1)*perKey; i++ {
					if sn := got[j][WatchID(i)]; sn == nil || sn.count != int64(want) {
						t.Fatalf("stream %d watcher %d: %v events of %d", j, i, sn, want)
					}
				}
				if sn := got[j][5000]; sn == nil || sn.count != int64(perKey*want) {
					t.Fatalf("stream %d prefix watcher: %v events of %d", j, sn, perKey*want)
				}
				if !wss[j].RequestProgressAll() {
					t.Fatalf("stream %d: no progress", j)
				}
				if r := <-wss[j].Chan(); r.WatchID != AllWatchers || r.Revision != rev {
					t.Fatalf("stream %d: progress %+v, want at %d", j, r, rev)
				}
			}
			if stuck.RequestProgressAll() {
				t.Fatal("progress for a stream whose watchers are parked")
			}
			// Now read the stuck stream: its watchers catch up.
			deadline = time.Now().Add(time.Minute)
			for {
				for _, r := range drain(stuck) {
					check(0, r)
				}
				if mode == "manual" {
					steps(t, s, 1)
				}
				st := s.WatchStats()
				if st.Parked == 0 && st.Unsynced == 0 && len(stuck.ch) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the stuck stream never caught up: %+v", st)
				}
				if mode == "background" {
					time.Sleep(time.Millisecond)
				}
			}
			for _, r := range drain(stuck) {
				check(0, r)
			}
			for i := range perKey {
				if sn := got[0][WatchID(i)]; sn == nil || sn.count != int64(want) {
					t.Fatalf("stuck stream watcher %d: %v events of %d", i, sn, want)
				}
			}
			if sn := got[0][5000]; sn == nil || sn.count != int64(perKey*want) {
				t.Fatalf("stuck stream prefix watcher: %v events of %d", sn, perKey*want)
			}
			t.Logf("up to %d responses with %d events parked on the stuck stream", maxParked, maxEvents)
		})
	}
}

// FuzzStoredKey: storedKey reads a stored KeyValue's key without decoding
// the rest; on any bytes it must not fail badly, and on every canonical
// encoding of a KeyValue with a key it must find that key.
func FuzzStoredKey(f *testing.F) {
	for _, kv := range []*mvccpb.KeyValue{
		{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: 3, Version: 2, Lease: 7},
		{Key: bytes.Repeat([]byte("x"), 200)},
		{Key: []byte{0}},
	} {
		data, _ := kv.Marshal()
		f.Add(data)
	}
	f.Add([]byte{0x0a, 0xff, 0xff})
	f.Add([]byte{0x12, 1, 'v'})
	f.Fuzz(func(t *testing.T, data []byte) {
		k, ok := storedKey(data)
		if ok && (len(data) < 1+len(k) || !bytes.Contains(data, k)) {
			t.Fatalf("storedKey %x of %x", k, data)
		}
		var kv mvccpb.KeyValue
		if kv.Unmarshal(data) != nil || len(kv.Key) == 0 {
			return
		}
		if again, err := kv.Marshal(); err != nil || !bytes.Equal(again, data) {
			return // not the canonical encoding the store writes
		}
		if !ok || !bytes.Equal(k, kv.Key) {
			t.Fatalf("storedKey of %x: %q %v, the key is %q", data, k, ok, kv.Key)
		}
	})
}

// TestWatchCorruptHistory: a catch-up that reads an entry the store could
// not have written fails with ErrCorrupt, and the background loop shows
// the error in WatchStats; the watcher waits, it is sent nothing false.
func TestWatchCorruptHistory(t *testing.T) {
	for _, bg := range []bool{false, true} {
		s, m := newMemStore(t, Options{Background: bg})
		put(t, s, 1, "k", "v") // 2
		if _, err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		b := &backend.Batch{}
		b.Put(bucketNames[bucketKey], revKey(Revision{Main: 2}, false), []byte("\x0a\x01kgarbage"))
		if err := m.Commit(b); err != nil {
			t.Fatal(err)
		}
		ws := s.NewWatchStream()
		ws.Watch(AutoWatchID, []byte("k"), nil, 2)
		if !bg {
			if _, err := s.WatchStep(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("catch-up over a corrupt entry: %v", err)
			}
		} else {
			deadline := time.Now().Add(time.Minute)
			for st := s.WatchStats(); !errors.Is(st.Err, ErrCorrupt); st = s.WatchStats() {
				if time.Now().After(deadline) {
					t.Fatalf("no error in the background: %+v", st)
				}
				time.Sleep(time.Millisecond)
			}
		}
		if rs := drain(ws); len(rs) != 0 {
			t.Fatalf("responses from a corrupt history: %+v", rs)
		}
		s.Close()
	}
}
