package check

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

// ev is a change of the committed history, as a watch delivers it.
type ev struct {
	rev             int64
	key             string
	put             bool
	value           int64
	create, version int64
}

// The committed history of watchHistory: two keys, a put with an unknown
// outcome among them (b=4 at 6), a delete and a key created again.
var watchTruth = []ev{
	{2, "w/a", true, 1, 2, 1},
	{3, "w/b", true, 2, 3, 1},
	{4, "w/a", true, 3, 2, 2},
	{5, "w/a", false, 0, 0, 0},
	{6, "w/b", true, 4, 3, 2},
	{7, "w/a", true, 5, 7, 1},
}

// watchBuilder writes a watch workload's history by hand, in time order.
type watchBuilder struct {
	ops []history.Op
	t   int64
}

func (b *watchBuilder) add(op history.Op) {
	b.t += 10
	op.Time = b.t
	op.Index = len(b.ops)
	b.ops = append(b.ops, op)
}

// put records a put of value to key: outcome "" leaves it in flight; rev
// is the acknowledged revision.
func (b *watchBuilder) put(p int, key string, value int64, outcome history.Type, rev int64) {
	b.write(history.Op{Process: p, F: history.FWrite, Key: key, Value: v(value), Node: 1}, outcome, rev)
}

func (b *watchBuilder) del(p int, key string, outcome history.Type, rev int64) {
	b.write(history.Op{Process: p, F: history.FDelete, Key: key, Node: 2}, outcome, rev)
}

func (b *watchBuilder) write(op history.Op, outcome history.Type, rev int64) {
	op.Type = history.Invoke
	b.add(op)
	if outcome == "" {
		return
	}
	op.Type = outcome
	if outcome == history.OK {
		op.Revision = rev
	}
	b.add(op)
}

func (b *watchBuilder) finalRead(key string, value *int64, mod, header int64) {
	op := history.Op{Process: -2, Type: history.Invoke, F: history.FFinalRead, Key: key, Node: 3, Level: "linearizable"}
	b.add(op)
	op.Type, op.Value, op.Revision, op.Watch = history.OK, value, mod, &history.WatchInfo{Header: header}
	b.add(op)
}

func (b *watchBuilder) record(f string, info history.WatchInfo, member int, rev int64, detail string) {
	i := info
	b.add(history.Op{Process: history.WatchProcess, Type: history.Info, F: f, Node: member, Revision: rev, Detail: detail, Watch: &i})
}

func (b *watchBuilder) open(info history.WatchInfo, member int, from int64, why string) {
	b.record(history.FWatchOpen, info, member, from, why)
}

func (b *watchBuilder) event(info history.WatchInfo, member int, e ev) {
	i := info
	i.Event, i.CreateRevision, i.Version = "delete", e.create, e.version
	op := history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchEvent, Node: member, Key: e.key, Revision: e.rev, Watch: &i}
	if e.put {
		i.Event, op.Value = "put", v(e.value)
	}
	b.add(op)
}

func (b *watchBuilder) progress(info history.WatchInfo, member int, rev int64) {
	b.record(history.FWatchProgress, info, member, rev, "")
}

func (b *watchBuilder) end(info history.WatchInfo, member int, rev int64, why string) {
	b.add(history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchEnd, Node: member, Revision: rev, Error: why, Watch: &info})
}

func (b *watchBuilder) replay(member int, events []ev, covered int64) {
	info := history.WatchInfo{Watcher: member, Replay: true, API: "grpc", Key: "w/", Prefix: true}
	b.open(info, member, 1, "replay")
	for _, e := range events {
		b.event(info, member, e)
	}
	b.end(info, member, covered, "")
}

var (
	prefixWatcher = history.WatchInfo{Watcher: 1, API: "grpc", Key: "w/", Prefix: true}
	keyWatcher    = history.WatchInfo{Watcher: 2, API: "http", Key: "w/a"}
)

// watchCase is a history to build: the writers' operations, then the
// watchers' records (which a test changes), then the final reads and the
// replays.
type watchCase struct {
	writes   func(b *watchBuilder)
	watchers func(b *watchBuilder)
	finals   func(b *watchBuilder)
	replays  func(b *watchBuilder)
}

func (c watchCase) history() []history.Op {
	var b watchBuilder
	c.writes(&b)
	c.watchers(&b)
	c.finals(&b)
	c.replays(&b)
	return b.ops
}

// validWatch is a valid history: watcher 1 (the prefix, gRPC) is sent
// revisions 2 to 4 through member 1, which goes silent, and 5 to 7
// through member 2 after it watches again from 5; watcher 2 (one key,
// HTTP) is sent 2 and 4, told of progress up to 4, and after a reconnect
// to member 3 is sent 5 and 7.
func validWatch() watchCase {
	return watchCase{
		writes: func(b *watchBuilder) {
			b.put(0, "w/a", 1, history.OK, 2)
			b.put(1, "w/b", 2, history.OK, 3)
			b.put(0, "w/a", 3, history.OK, 4)
			b.del(1, "w/a", history.OK, 5)
			b.put(2, "w/b", 4, history.Info, 0) // applied, though unknown
			b.put(3, "w/b", 6, history.Fail, 0) // not applied
			b.put(4, "w/a", 7, history.Info, 0) // not applied either
			b.put(0, "w/a", 5, history.OK, 7)   // created again
			b.del(5, "w/b", "", 0)              // in flight at the end; never applied
			b.del(6, "w/b", history.Fail, 0)    // refused
		},
		watchers: func(b *watchBuilder) {
			w1, w2 := prefixWatcher, keyWatcher
			b.open(w1, 1, 1, "start")
			b.open(w2, 2, 1, "start")
			for _, e := range watchTruth[:3] {
				b.event(w1, 1, e)
			}
			b.event(w2, 2, watchTruth[0])
			b.event(w2, 2, watchTruth[2])
			b.progress(w2, 2, 4)
			b.end(w1, 1, 4, "nothing for 4s")
			b.open(w1, 2, 5, "nothing for 4s")
			b.end(w2, 2, 4, "etcdserver: no leader")
			b.open(w2, 3, 5, "etcdserver: no leader")
			for _, e := range watchTruth[3:] {
				b.event(w1, 2, e)
			}
			b.event(w2, 3, watchTruth[3])
			b.event(w2, 3, watchTruth[5])
			b.end(w1, 2, 7, "stopped: the test is over")
			b.end(w2, 3, 7, "stopped: the test is over")
		},
		finals: func(b *watchBuilder) {
			b.finalRead("w/a", v(5), 7, 7)
			b.finalRead("w/b", v(4), 6, 7)
		},
		replays: func(b *watchBuilder) {
			b.replay(1, watchTruth, 7)
			b.replay(2, watchTruth, 7)
		},
	}
}

func kinds(res WatchResult) []string {
	var out []string
	for _, a := range res.Anomalies {
		out = append(out, a.Kind)
	}
	return out
}

func TestWatchValid(t *testing.T) {
	res := Watch(validWatch().history())
	require.Equal(t, Valid, res.Valid, "%s %s", res.Error, res.Anomaly)
	assert.Zero(t, res.AnomalyCount)
	assert.Equal(t, int64(7), res.FinalRevision)
	assert.Equal(t, 1, res.TruthMember)
	assert.Equal(t, 6, res.TruthEvents)
	assert.Equal(t, 10, res.Events)
	assert.Equal(t, 2, res.Reconnects)
	require.Len(t, res.Watchers, 2)
	w1, w2 := res.Watchers[0], res.Watchers[1]
	assert.Equal(t, WatcherSummary{Watcher: 1, API: "grpc", Key: "w/", Prefix: true, Start: 1, Covered: 7, Target: 7,
		Events: 6, Expected: 6, Reconnects: 1, Members: []int{1, 2}}, w1)
	assert.Equal(t, WatcherSummary{Watcher: 2, API: "http", Key: "w/a", Start: 1, Covered: 7, Target: 7,
		Events: 4, Expected: 4, Progress: 1, Reconnects: 1, Members: []int{2, 3}}, w2)
	assert.Equal(t, map[string]int{"ok": 4, "fail": 1, "info": 2}, res.Writes["write"])
	assert.Equal(t, map[string]int{"ok": 1, "fail": 1, "info": 1}, res.Writes["delete"])
	for _, r := range res.Replays {
		assert.True(t, r.Agrees, "%+v", r)
	}
}

// A watcher that resumes one revision late misses the change there: a
// gap, named with the reconnect it followed.
func TestWatchGapAfterReconnect(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w1 := prefixWatcher
		b.open(w1, 1, 1, "start")
		for _, e := range watchTruth[:3] {
			b.event(w1, 1, e)
		}
		b.end(w1, 1, 4, "nothing for 4s")
		b.open(w1, 2, 6, "nothing for 4s") // one late
		for _, e := range watchTruth[4:] {
			b.event(w1, 2, e)
		}
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchGap}, kinds(res), res.Anomaly)
	a := res.Anomalies[0]
	assert.Equal(t, 1, a.Watcher)
	assert.Equal(t, 2, a.Member)
	assert.Equal(t, int64(5), a.Revision)
	assert.Equal(t, "w/a", a.Key)
	assert.Contains(t, a.Detail, "1 change(s) of its keys never sent, revisions 5 to 5 (first: delete w/a at 5)")
	assert.Contains(t, a.Detail, "after it watched again through member 2 from revision 6 (after: nothing for 4s)")
	assert.Contains(t, res.Anomaly, "gap: watcher 1 (grpc) on member 2 at revision 5")
}

// A progress notification past a change never sent is a gap too, even
// when no later event follows.
func TestWatchGapBeforeProgress(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w2 := keyWatcher
		b.open(w2, 2, 1, "start")
		b.event(w2, 2, watchTruth[0])
		b.progress(w2, 2, 7)
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchGap}, kinds(res), res.Anomaly)
	assert.Contains(t, res.Anomalies[0].Detail, "3 change(s) of its keys never sent, revisions 4 to 7")
	assert.Contains(t, res.Anomalies[0].Detail, "though member 2 said every change up to revision 7 was sent")
}

// A watcher sent a change again after resuming from too early.
func TestWatchDuplicate(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w1 := prefixWatcher
		b.open(w1, 1, 1, "start")
		for _, e := range watchTruth[:3] {
			b.event(w1, 1, e)
		}
		b.open(w1, 2, 4, "nothing for 4s") // one early
		for _, e := range watchTruth[2:] {
			b.event(w1, 2, e)
		}
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchDuplicate}, kinds(res), res.Anomaly)
	assert.Equal(t, int64(4), res.Anomalies[0].Revision)
	assert.Equal(t, 2, res.Anomalies[0].Member)
}

// Revisions out of order: the later one first (a gap at the time), then
// the earlier one (a reorder).
func TestWatchReorder(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w1 := prefixWatcher
		b.open(w1, 1, 1, "start")
		b.event(w1, 1, watchTruth[1])
		b.event(w1, 1, watchTruth[0])
		for _, e := range watchTruth[2:] {
			b.event(w1, 1, e)
		}
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []string{WatchGap, WatchReorder}, kinds(res), res.Anomaly)
	assert.Equal(t, int64(2), res.Anomalies[1].Revision)
}

// An event the committed history does not have, and one of a key the
// watcher does not watch.
func TestWatchInvented(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w1, w2 := prefixWatcher, keyWatcher
		b.open(w1, 1, 1, "start")
		b.open(w2, 2, 1, "start")
		for _, e := range watchTruth {
			b.event(w1, 1, e)
			if e.rev == 5 {
				b.event(w1, 1, ev{5, "w/c", true, 99, 5, 1})
			}
		}
		b.event(w2, 2, watchTruth[0])
		b.event(w2, 2, watchTruth[1]) // w/b
		b.event(w2, 2, watchTruth[2])
		b.event(w2, 2, watchTruth[3])
		b.event(w2, 2, watchTruth[5])
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchInvented, WatchInvented}, kinds(res), res.Anomaly)
	assert.Equal(t, 1, res.Anomalies[0].Watcher)
	assert.Contains(t, res.Anomalies[0].Detail, "put w/c=99 at 5")
	assert.Contains(t, res.Anomalies[0].Detail, "the committed history has no such change")
	assert.Equal(t, 2, res.Anomalies[1].Watcher)
	assert.Contains(t, res.Anomalies[1].Detail, "does not watch w/b")
}

// The right revision and key with another value or version.
func TestWatchWrongValue(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w2 := keyWatcher
		b.open(w2, 2, 1, "start")
		b.event(w2, 2, watchTruth[0])
		b.event(w2, 2, ev{4, "w/a", true, 33, 2, 2})
		b.event(w2, 2, watchTruth[3])
		b.event(w2, 2, ev{7, "w/a", true, 5, 2, 3})
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchWrongValue, WatchWrongValue}, kinds(res), res.Anomaly)
	assert.Contains(t, res.Anomalies[0].Detail, "it was sent put w/a=33 at 4 (created 2, version 2); the committed history has put w/a=3 at 4")
	assert.Contains(t, res.Anomalies[1].Detail, "(created 2, version 3)")
}

// A watcher that was never sent its keys' last changes after the heal.
func TestWatchStalled(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w2 := keyWatcher
		b.open(w2, 2, 1, "start")
		b.event(w2, 2, watchTruth[0])
		b.event(w2, 2, watchTruth[2])
		b.end(w2, 2, 4, "stopped: the test is over")
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchStalled}, kinds(res), res.Anomaly)
	assert.Contains(t, res.Anomalies[0].Detail, "up to revision 4 only; its keys changed up to revision 7 (2 change(s)")
}

// A watcher a compaction ended is judged up to there, and listed.
func TestWatchCompacted(t *testing.T) {
	c := validWatch()
	c.watchers = func(b *watchBuilder) {
		w2 := keyWatcher
		b.open(w2, 2, 1, "start")
		b.event(w2, 2, watchTruth[0])
		b.event(w2, 2, watchTruth[2])
		end := w2
		end.CompactRevision = 6
		b.end(end, 2, 4, "compacted")
	}
	res := Watch(c.history())
	require.Equal(t, Valid, res.Valid, res.Anomaly)
	assert.Equal(t, []int{2}, res.Compacted)
	assert.Equal(t, int64(6), res.Watchers[0].CompactRevision)
	assert.Contains(t, res.Summary(), "compacted: watchers [2], judged up to their compaction")
}

// The committed history must hold every acknowledged write at its
// revision and nothing else a writer did not attempt or was refused.
func TestWatchTruthAgainstWriters(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes func(b *watchBuilder)
		kind   string
		detail string
	}{
		{"an acknowledged put missing", func(b *watchBuilder) { b.put(9, "w/b", 8, history.OK, 8) },
			WatchLostWrite, "the put of 8 to w/b (process 9, through member 1) was acknowledged at revision 8"},
		{"an acknowledged delete missing", func(b *watchBuilder) { b.del(9, "w/b", history.OK, 8) },
			WatchLostWrite, "the delete of w/b (process 9, through member 2) was acknowledged at revision 8"},
		{"a failed put present", func(b *watchBuilder) {
			b.ops = b.ops[:0]
			b.put(0, "w/a", 1, history.OK, 2)
			b.put(1, "w/b", 2, history.Fail, 0)
			b.put(0, "w/a", 3, history.OK, 4)
			b.del(1, "w/a", history.OK, 5)
			b.put(2, "w/b", 4, history.Info, 0)
			b.put(0, "w/a", 5, history.OK, 7)
		}, WatchFailedPresent, "put w/b=2 at 3 (created 3, version 1): the put of 2 (process 1, through member 1) failed"},
		{"an acknowledged put at another revision", func(b *watchBuilder) {
			b.ops = b.ops[:0]
			b.put(0, "w/a", 1, history.OK, 2)
			b.put(1, "w/b", 2, history.OK, 3)
			b.put(0, "w/a", 3, history.OK, 4)
			b.del(1, "w/a", history.OK, 5)
			b.put(2, "w/b", 4, history.OK, 5)
			b.put(0, "w/a", 5, history.OK, 7)
		}, WatchWrongRevision, "put w/b=4 at 6 (created 3, version 2): the put of 4 was acknowledged at revision 5"},
		{"a put nobody attempted", func(b *watchBuilder) {
			b.ops = b.ops[:0]
			b.put(0, "w/a", 1, history.OK, 2)
			b.put(1, "w/b", 2, history.OK, 3)
			b.put(0, "w/a", 3, history.OK, 4)
			b.del(1, "w/a", history.OK, 5)
			b.put(0, "w/a", 5, history.OK, 7)
		}, WatchUnattempted, "put w/b=4 at 6 (created 3, version 2): no writer put 4 to w/b"},
		{"a delete nobody attempted", func(b *watchBuilder) {
			b.ops = b.ops[:0]
			b.put(0, "w/a", 1, history.OK, 2)
			b.put(1, "w/b", 2, history.OK, 3)
			b.put(0, "w/a", 3, history.OK, 4)
			b.put(2, "w/b", 4, history.Info, 0)
			b.put(0, "w/a", 5, history.OK, 7)
		}, WatchUnattempted, "1 deletion(s) of w/a at revisions [5] that no acknowledged delete made, and only 0 delete(s) with an unknown outcome"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wc := validWatch()
			base := wc.writes
			wc.writes = func(b *watchBuilder) {
				base(b)
				c.writes(b)
			}
			res := Watch(wc.history())
			require.Equal(t, Invalid, res.Valid)
			require.Equal(t, []string{c.kind}, kinds(res), res.Anomaly)
			assert.Contains(t, res.Anomalies[0].Detail, c.detail)
			assert.Zero(t, res.Anomalies[0].Watcher)
		})
	}
}

// The final read must find every key as the committed history leaves it.
func TestWatchFinalReadDiffers(t *testing.T) {
	c := validWatch()
	c.finals = func(b *watchBuilder) {
		b.finalRead("w/a", v(5), 7, 7)
		b.finalRead("w/b", nil, 0, 7)
	}
	res := Watch(c.history())
	require.Equal(t, Invalid, res.Valid)
	require.Equal(t, []string{WatchFinalRead}, kinds(res), res.Anomaly)
	assert.Contains(t, res.Anomalies[0].Detail, "the final read of w/b through member 3 found missing; the committed history leaves it 4 (mod_revision 6)")
}

// Every member's replay must agree with the committed history, and that
// history with itself.
func TestWatchReplays(t *testing.T) {
	t.Run("differ", func(t *testing.T) {
		c := validWatch()
		c.replays = func(b *watchBuilder) {
			b.replay(1, watchTruth, 7)
			b.replay(2, append(append([]ev{}, watchTruth[:3]...), watchTruth[4:]...), 7)
		}
		res := Watch(c.history())
		require.Equal(t, Invalid, res.Valid)
		require.Equal(t, []string{WatchReplayDiffers}, kinds(res), res.Anomaly)
		assert.Equal(t, 2, res.Anomalies[0].Member)
		assert.Contains(t, res.Anomalies[0].Detail, "it has put w/b=4 at 6 (created 3, version 2) where the other has delete w/a at 5")
		assert.False(t, res.Replays[1].Agrees)
	})
	t.Run("inconsistent", func(t *testing.T) {
		bad := append([]ev{}, watchTruth...)
		bad[2].version = 1
		c := validWatch()
		c.replays = func(b *watchBuilder) { b.replay(1, bad, 7) }
		res := Watch(c.history())
		require.Equal(t, Invalid, res.Valid)
		// The watchers were sent the right change, so they disagree too.
		assert.Equal(t, WatchInconsistent, res.Anomalies[0].Kind, res.Anomaly)
		assert.Contains(t, res.Anomalies[0].Detail, "where the key's earlier changes make it created 2, version 2")
	})
	t.Run("short replays are judged only as far as they went", func(t *testing.T) {
		c := validWatch()
		c.replays = func(b *watchBuilder) {
			b.replay(1, watchTruth[:2], 3) // stopped short
			b.replay(2, watchTruth, 7)
		}
		res := Watch(c.history())
		require.Equal(t, Valid, res.Valid, res.Anomaly)
		assert.Equal(t, 2, res.TruthMember)
	})
	t.Run("none reached the final read", func(t *testing.T) {
		c := validWatch()
		c.replays = func(b *watchBuilder) { b.replay(1, watchTruth[:2], 3) }
		res := Watch(c.history())
		assert.Equal(t, Unknown, res.Valid)
		assert.Contains(t, res.Error, "no member replayed the history up to the final read's revision 7")
		assert.Len(t, res.Watchers, 2, "the watchers are still listed")
	})
	t.Run("no final read", func(t *testing.T) {
		c := validWatch()
		c.finals = func(*watchBuilder) {}
		res := Watch(c.history())
		assert.Equal(t, Unknown, res.Valid)
		assert.Contains(t, res.Error, "no final read")
	})
}

// The result's JSON has what the report needs.
func TestWatchResultJSON(t *testing.T) {
	res := Watch(validWatch().history())
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, "true", got["valid"])
	assert.EqualValues(t, 7, got["final_revision"])
	assert.Len(t, got["watchers"], 2)
	assert.Len(t, got["replays"], 2)
}
