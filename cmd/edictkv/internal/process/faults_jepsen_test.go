//go:build jepsen

package process

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

func setFaults(t *testing.T, c *testCluster, id edict.ProcessID, body string) FaultsJSON {
	t.Helper()
	a := do(t, "POST", c.url(id, "/debug/jepsen/faults"), body)
	mustStatus(t, a, 200)
	var f FaultsJSON
	a.json(t, &f)
	return f
}

func TestFaultsPartitionAndHeal(t *testing.T) {
	c := startCluster(t, 3, nil)
	old := c.leader()
	mustStatus(t, do(t, "PUT", c.url(old, "/v1/kv/k"), "v1"), 200)

	// Cut the leader off from both others, on every side.
	var others []edict.ProcessID
	for id := range c.procs {
		if id != old {
			others = append(others, id)
		}
	}
	setFaults(t, c, old, fmt.Sprintf(`{"blocked":[%d,%d]}`, others[0], others[1]))
	for _, id := range others {
		setFaults(t, c, id, fmt.Sprintf(`{"blocked":[%d]}`, old))
	}
	var got FaultsJSON
	do(t, "GET", c.url(old, "/debug/jepsen/faults"), "").json(t, &got)
	if got.Blocked == nil || len(*got.Blocked) != 2 || got.ClockRate == nil || *got.ClockRate != 1 {
		t.Fatalf("GET faults = %+v", got)
	}

	var next edict.ProcessID
	eventually(t, "a new leader among the majority", func() bool {
		for _, id := range others {
			if c.procs[id].Node.Status().IsLeader {
				next = id
				return true
			}
		}
		return false
	})
	eventually(t, "the old leader to step down", func() bool { return !c.procs[old].Node.Status().IsLeader })
	mustStatus(t, do(t, "PUT", c.url(next, "/v1/kv/k"), "v2"), 200)

	// Heal: the old leader catches up.
	for id := range c.procs {
		setFaults(t, c, id, `{"blocked":[]}`)
	}
	eventually(t, "the old leader to see the write made without it", func() bool {
		a := do(t, "GET", c.url(old, "/v1/kv/k?consistency=stale"), "")
		if a.status != 200 {
			return false
		}
		var g kvjson.GetResponse
		a.json(t, &g)
		return g.Value != nil && *g.Value == "v2"
	})
	do(t, "GET", c.url(old, "/debug/jepsen/faults"), "").json(t, &got)
	if got.Blocked == nil || len(*got.Blocked) != 0 {
		t.Fatalf("after heal, GET faults = %+v", got)
	}
}

func TestFaultsClockRate(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.leader()
	p := c.procs[1]
	t0 := p.Node.Clock().Now()
	time.Sleep(50 * time.Millisecond)
	f := setFaults(t, c, 1, `{"clock_rate": 2}`)
	if *f.ClockRate != 2 || len(*f.Blocked) != 0 {
		t.Fatalf("POST answered %+v", f)
	}
	t1 := p.Node.Clock().Now()
	if d, _ := t1.Sub(t0); d < 40*time.Millisecond || d > 2*time.Second {
		t.Fatalf("the clock jumped at the rate change: %v", d)
	}
	start := time.Now()
	time.Sleep(200 * time.Millisecond)
	t2 := p.Node.Clock().Now()
	real := time.Since(start)
	d, _ := t2.Sub(t1)
	if d < time.Duration(1.8*float64(real)) || d > time.Duration(2.2*float64(real))+20*time.Millisecond {
		t.Fatalf("at rate 2 the clock advanced %v in %v", d, real)
	}
	if p.Node.Clock().Suspended(t1) {
		t.Fatal("a fast clock reports a suspend")
	}
	setFaults(t, c, 1, `{"clock_rate": 1}`)
	mustStatus(t, do(t, "PUT", c.url(1, "/v1/kv/a"), "b"), 200)
	a := do(t, "POST", c.url(1, "/debug/jepsen/faults"), `{"clock_rate": -1}`)
	mustStatus(t, a, 400)
}

// putEventually writes key=val through node id, retrying while the
// cluster answers anything but 200 (a lease lapsing under delays).
func putEventually(t *testing.T, c *testCluster, id edict.ProcessID, key, val string) {
	t.Helper()
	eventually(t, "PUT "+key, func() bool {
		return do(t, "PUT", c.url(id, "/v1/kv/"+key), val).status == 200
	})
}

// Under the delay fault writes still commit, and the stats show that
// messages were held, duplicated and reordered; a zero delay turns it off
// and starts the counts afresh.
func TestFaultsDelay(t *testing.T) {
	c := startCluster(t, 3, nil)
	l := c.leader()
	for id := range c.procs {
		f := setFaults(t, c, id, `{"delay":{"p":0.2,"min_ms":20,"max_ms":300,"dup":0.2,"reorder":0.2,"reorder_ms":10}}`)
		if f.Delay == nil || f.Delay.P != 0.2 || f.Delay.MaxMS != 300 {
			t.Fatalf("POST answered %+v", f.Delay)
		}
	}
	for i := range 30 {
		putEventually(t, c, l, "k", fmt.Sprint(i))
	}
	var held, dup, reord uint64
	for id := range c.procs {
		var f FaultsJSON
		do(t, "GET", c.url(id, "/debug/jepsen/faults"), "").json(t, &f)
		held, dup, reord = held+f.Stats.Held, dup+f.Stats.Duplicated, reord+f.Stats.Reordered
	}
	if held == 0 || dup == 0 || reord == 0 {
		t.Fatalf("held %d, duplicated %d, reordered %d: the delay did nothing", held, dup, reord)
	}
	for id := range c.procs {
		f := setFaults(t, c, id, `{"delay":{}}`)
		if *f.Delay != (DelayJSON{}) || f.Stats.Held != 0 {
			t.Fatalf("after turning the delay off: %+v %+v", f.Delay, f.Stats)
		}
	}
	putEventually(t, c, c.leader(), "k", "last")
	for id := range c.procs {
		eventually(t, "every node to apply the last write", func() bool {
			a := do(t, "GET", c.url(id, "/v1/kv/k?consistency=stale"), "")
			var g kvjson.GetResponse
			if a.status != 200 {
				return false
			}
			a.json(t, &g)
			return g.Value != nil && *g.Value == "last"
		})
	}
	for _, bad := range []string{`{"delay":{"p":2}}`, `{"delay":{"min_ms":10,"max_ms":5}}`, `{"delay":{"max_ms":-1}}`} {
		mustStatus(t, do(t, "POST", c.url(l, "/debug/jepsen/faults"), bad), 400)
	}
}

// A duplicate shares no memory with the original.
func TestDeepCopyMessage(t *testing.T) {
	qt := edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 5}}}
	m := wire.Message{From: 1, To: 2, Append: &wire.Append{Epoch: 1, Reign: edict.Stamp{Epoch: 1, QT: qt},
		Entries: []wire.Entry{{Index: 1, Stamp: edict.Stamp{Epoch: 1, QT: qt, Counter: 1}, Data: []byte("abc")}}}}
	cp := deepCopy(m)
	if !reflect.DeepEqual(m, cp) {
		t.Fatalf("copy differs: %+v", cp)
	}
	cp.Append.Entries[0].Data[0] = 'x'
	cp.Append.Entries[0].Stamp.QT[0].Process = 9
	cp.Append.Reign.QT[0].T.Nanos = 7
	cp.Append.Epoch = 2
	if string(m.Append.Entries[0].Data) != "abc" || m.Append.Entries[0].Stamp.QT[0].Process != 1 ||
		qt[0].T.Nanos != 5 || m.Append.Epoch != 1 {
		t.Fatalf("changing the copy changed the original: %+v", m.Append)
	}
}

// A follower cut off while the log is compacted past it gets a snapshot
// when healed; the stream is held under snapshot_ms, and both ends count
// it.
func TestFaultsSnapshotHeldAndCounted(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.SnapshotEvery = 64 })
	l := c.leader()
	f := c.follower(l)
	var rest []uint64
	for id := range c.procs {
		if id != f {
			rest = append(rest, uint64(id))
			setFaults(t, c, id, fmt.Sprintf(`{"blocked":[%d]}`, f))
		}
	}
	setFaults(t, c, f, fmt.Sprintf(`{"blocked":[%d,%d],"delay":{"snapshot_ms":300}}`, rest[0], rest[1]))
	// More than the 1024 trailing entries the log keeps behind a
	// snapshot, written by a few writers at once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 170 {
				req, _ := http.NewRequest("PUT", c.url(l, fmt.Sprintf("/v1/kv/w%d-%d", w, i)), strings.NewReader("v"))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	putEventually(t, c, l, "last", "v")
	for id := range c.procs {
		setFaults(t, c, id, `{"blocked":[]}`)
	}
	eventually(t, "the follower to install a snapshot", func() bool {
		var lf, ff FaultsJSON
		do(t, "GET", c.url(c.leader(), "/debug/jepsen/faults"), "").json(t, &lf)
		do(t, "GET", c.url(f, "/debug/jepsen/faults"), "").json(t, &ff)
		return lf.Stats.SnapshotsInstalled >= 1 && ff.Stats.SnapshotsReceived >= 1 && ff.Stats.SnapshotsHeld >= 1 &&
			ff.Stats.SnapshotsHolding == 0
	})
	eventually(t, "the follower to hold the last write", func() bool {
		return do(t, "GET", c.url(f, "/v1/kv/last?consistency=stale"), "").status == 200
	})
}

// The fsync fault delays every durable batch of the process it is set on:
// its writes wait for it, the append histogram and the Node's storage
// statistics see it (a slow write counted, entries waiting for their
// fsync), the hook counts it; writes still succeed, and the zero setting
// turns it off and starts the counts afresh.
func TestFaultsFsyncDelay(t *testing.T) {
	c := startCluster(t, 3, nil)
	l := c.leader()
	f := c.follower(l)
	for _, id := range []edict.ProcessID{l, f} {
		got := setFaults(t, c, id, `{"fsync":{"min_ms":150,"max_ms":300}}`)
		if got.Fsync == nil || *got.Fsync != (FsyncJSON{MinMS: 150, MaxMS: 300}) {
			t.Fatalf("POST answered %+v", got.Fsync)
		}
	}
	// The leader's own batch and a quorum's: at least the injected
	// minimum, since the leader counts its own write toward the commit.
	start := time.Now()
	putEventually(t, c, l, "k", "v0")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("a write took %v under a 150 ms fsync delay at the leader", d)
	}
	// Writers keep entries coming while the follower's /metrics is read:
	// some are waiting for its slow fsync.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("PUT", c.url(l, fmt.Sprintf("/v1/kv/w%d-%d", w, i)), strings.NewReader("v"))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	eventually(t, "entries waiting for the follower's fsync", func() bool {
		return metric(t, scrape(t, c, f), "edictkv_unsynced_entries") > 0
	})
	close(stop)
	wg.Wait()

	for _, id := range []edict.ProcessID{l, f} {
		var got FaultsJSON
		do(t, "GET", c.url(id, "/debug/jepsen/faults"), "").json(t, &got)
		if got.Stats.FsyncDelayed == 0 || got.Stats.FsyncDelayMS < 150*got.Stats.FsyncDelayed {
			t.Fatalf("process %d: %d batches delayed by %d ms in all, under a 150-300 ms delay", id, got.Stats.FsyncDelayed, got.Stats.FsyncDelayMS)
		}
		m := scrape(t, c, id)
		// A quarter of the 620 ms lease is 155 ms: nearly every delayed batch is
		// a slow write, and lands above the 0.1024 s bucket.
		if v := metric(t, m, "edictkv_slow_writes_total"); v == 0 {
			t.Errorf("process %d counts no slow write", id)
		}
		total := metric(t, m, "edictkv_append_seconds_count")
		fast := metric(t, m, `edictkv_append_seconds_bucket{le="0.1024"}`)
		if total-fast < float64(got.Stats.FsyncDelayed)/2 {
			t.Errorf("process %d: %g of %g appends took over 0.1 s, with %d delayed", id, total-fast, total, got.Stats.FsyncDelayed)
		}
	}
	// The other follower's disk is healthy.
	for id := range c.procs {
		if id != l && id != f {
			var got FaultsJSON
			do(t, "GET", c.url(id, "/debug/jepsen/faults"), "").json(t, &got)
			if got.Stats.FsyncDelayed != 0 || got.Fsync.on() {
				t.Fatalf("process %d, not slowed: %+v %+v", id, got.Fsync, got.Stats)
			}
		}
	}

	for _, id := range []edict.ProcessID{l, f} {
		got := setFaults(t, c, id, `{"fsync":{}}`)
		if *got.Fsync != (FsyncJSON{}) || got.Stats.FsyncDelayed != 0 {
			t.Fatalf("after turning the fsync delay off: %+v %+v", got.Fsync, got.Stats)
		}
	}
	putEventually(t, c, c.leader(), "k", "last")
	for _, bad := range []string{`{"fsync":{"min_ms":-1}}`, `{"fsync":{"min_ms":300,"max_ms":100}}`, `{"fsync":{"max_ms":600000}}`} {
		mustStatus(t, do(t, "POST", c.url(l, "/debug/jepsen/faults"), bad), 400)
	}
}

// A process started with the fsync fault in its environment is slow from
// its first batch, as one restarted during a slow-disk fault must be.
func TestFaultsFsyncFromEnvironment(t *testing.T) {
	t.Setenv(FaultsEnv, `{"fsync":{"min_ms":120}}`)
	c := startCluster(t, 1, nil)
	c.leader()
	var got FaultsJSON
	do(t, "GET", c.url(1, "/debug/jepsen/faults"), "").json(t, &got)
	if *got.Fsync != (FsyncJSON{MinMS: 120}) || got.Stats.FsyncDelayed == 0 {
		t.Fatalf("from the environment: %+v %+v", got.Fsync, got.Stats)
	}
	start := time.Now()
	putEventually(t, c, 1, "k", "v")
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Fatalf("a write took %v under a fixed 120 ms fsync delay", d)
	}
}
