package simstate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/sim"
)

// TestWatchCheckCatches shows each check of a watch's responses failing
// on a response that differs from the model: an event missing, one
// repeated, a wrong prev_kv or one not asked for, a filter not applied,
// a progress notification not asked for, at another revision or before
// events sent, a compaction that does not pass the watch, a response
// after the client's cancel, a revision the process has not made, and at
// the end a watch never sent what it should have been.
func TestWatchCheckCatches(t *testing.T) {
	enc := func(r *kvstate.Request) []byte {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(k, v string) []byte {
		return enc(&kvstate.Request{Put: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}})
	}
	c := NewChecker(1)
	c.w = nil // the test drives its own watchers
	r := newReplica(t, c, rand.New(rand.NewPCG(1, 1)))
	r.append(put("w/a", "1"))                                                                // 2
	r.append(put("w/a", "2"))                                                                // 3
	r.append(put("w/b", "3"))                                                                // 4
	r.append(enc(&kvstate.Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("w/a")}})) // 5
	if r.m.Rev() != 5 {
		t.Fatalf("the state is at revision %d", r.m.Rev())
	}
	// events are the model's events of the prefix in [from, to], as a
	// watcher with opts is sent them.
	events := func(opts mvcc.WatchOption, from, to int64) []mvccpb.Event {
		var out []mvccpb.Event
		for _, x := range c.m.watchEvents([]byte("w/"), workEnd, opts, from, to) {
			e := mvccpb.Event{Type: eventType(x), Kv: x.kv}
			if opts&mvcc.WatchPrevKV != 0 {
				e.PrevKv = x.prev
			}
			out = append(out, e)
		}
		return out
	}
	type setup struct {
		w  *watchers
		s  *wstream
		a  *attach
		cw *cwatch
	}
	newWatchFrom := func(opts mvcc.WatchOption, start int64) setup {
		w := newWatchers(1)
		pr := w.life(1, r.m.State)
		s := w.stream(pr)
		cw := &cwatch{n: 1, key: []byte("w/"), end: workEnd, opts: opts, from: 2, next: 2}
		if err := w.watch(s, cw, start); err != nil {
			t.Fatal(err)
		}
		return setup{w, s, cw.at, cw}
	}
	// A watch the test's responses go to: its watcher, from 6, is sent
	// nothing by the store.
	newWatch := func(opts mvcc.WatchOption) setup { return newWatchFrom(opts, 6) }
	expect := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error naming %q", err, want)
		}
	}
	good := func(x setup, resp mvcc.WatchResponse) {
		t.Helper()
		if err := x.w.check(c, x.s, resp); err != nil {
			t.Fatalf("a response as the model has it: %v", err)
		}
	}

	x := newWatch(0)
	good(x, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: events(0, 2, 5)})
	if x.cw.next != 6 {
		t.Fatalf("next %d after a response at 5", x.cw.next)
	}

	x = newWatch(0)
	evs := events(0, 2, 5)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: append(evs[:1:1], evs[2:]...)}), `the PUT of "w/a" at 3 is missing`)
	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: evs[:3]}), `the DELETE of "w/a" at 5 is missing`)

	x = newWatch(0)
	good(x, mvcc.WatchResponse{WatchID: x.a.id, Revision: 3, Events: events(0, 2, 3)})
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 3, Events: events(0, 3, 3)}), "before its next")

	x = newWatch(mvcc.WatchPrevKV)
	evs = events(mvcc.WatchPrevKV, 2, 5)
	bad := *evs[1].PrevKv
	bad.Value = []byte("X")
	evs[1].PrevKv = &bad
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: evs}), "has prev_kv")
	x = newWatch(mvcc.WatchPrevKV)
	evs = events(mvcc.WatchPrevKV, 2, 5)
	evs[3].PrevKv = nil
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: evs}), "has no prev_kv")
	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: events(mvcc.WatchPrevKV, 2, 5)}), "not asked for")

	x = newWatch(mvcc.WatchNoDelete)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: events(0, 2, 5)}), `DELETE`)
	x = newWatch(mvcc.WatchNoPut)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: events(0, 2, 5)}), `PUT`)

	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5}), "no progress notification")
	x = newWatch(0)
	x.s.progress = append(x.s.progress, progressReq{id: x.a.id, rev: 5})
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 4}), "asked when the process was at 5")
	x = newWatch(0)
	x.s.progress = append(x.s.progress, progressReq{id: x.a.id, rev: 5})
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5}), "below the start revision 6")
	x = newWatch(0)
	x.a.startRev = 2
	x.s.progress = append(x.s.progress, progressReq{id: x.a.id, rev: 5})
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5}), `before the PUT of "w/a" at 2`)
	x = newWatch(0)
	x.a.startRev = 2
	x.s.progress = append(x.s.progress, progressReq{id: mvcc.AllWatchers, rev: 5, all: []*attach{x.a}})
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: mvcc.AllWatchers, Revision: 5}), `before the PUT of "w/a" at 2`)

	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, CompactRevision: 2}), "does not pass its next revision 2")
	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, CompactRevision: 4}), "past the process's")

	x = newWatch(0)
	x.a.cancelled, x.a.cutoff = true, x.s.read
	x.s.read++ // as read does before its check
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 5, Events: events(0, 2, 5)}), "after its client cancelled it")

	x = newWatch(0)
	expect(x.w.check(c, x.s, mvcc.WatchResponse{WatchID: x.a.id, Revision: 6, Events: events(0, 2, 5)}), "has not made")

	// At the end, the store's catch-up run to its end: a watch (next 2)
	// whose watcher starts at 5 is sent 5 alone, one from 6 nothing.
	x = newWatchFrom(0, 5)
	expect(x.w.end(c, map[edict.ProcessID]sim.ModelState{1: {State: r.m, Applied: r.applied}}), `the PUT of "w/a" at 2 is missing`)
	x = newWatch(0)
	expect(x.w.end(c, map[edict.ProcessID]sim.ModelState{1: {State: r.m, Applied: r.applied}}), `never sent the PUT of "w/a" at 2`)
}

// TestWatchReplays: a seed's run, its watch clients included, is the same
// run each time, so that a failure's replay finds it again.
func TestWatchReplays(t *testing.T) {
	for _, sc := range logScenarios() {
		if sc.Name != "crash-snapshot-reset" {
			continue
		}
		var runs [2]string
		for i := range runs {
			esc := Scenario(sc, 2)
			var ck *Checker
			esc.Model = func() sim.Model { ck = NewChecker(2); return ck }
			res := sim.RunLog(esc, 2)
			if res.Violation != "" {
				t.Fatalf("%v", res)
			}
			runs[i] = fmt.Sprintf("%v; %v", res, ck.WatchStats())
		}
		if runs[0] != runs[1] {
			t.Fatalf("two runs of one seed differ:\n%s\n%s", runs[0], runs[1])
		}
		t.Log(runs[0])
		return
	}
	t.Fatal("no scenario crash-snapshot-reset")
}
