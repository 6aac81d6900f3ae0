//go:build jepsen

package kvserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
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
		var g GetResponse
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
	t0 := p.nodeClock.Now()
	time.Sleep(50 * time.Millisecond)
	f := setFaults(t, c, 1, `{"clock_rate": 2}`)
	if *f.ClockRate != 2 || len(*f.Blocked) != 0 {
		t.Fatalf("POST answered %+v", f)
	}
	t1 := p.nodeClock.Now()
	if d, _ := t1.Sub(t0); d < 40*time.Millisecond || d > 2*time.Second {
		t.Fatalf("the clock jumped at the rate change: %v", d)
	}
	start := time.Now()
	time.Sleep(200 * time.Millisecond)
	t2 := p.nodeClock.Now()
	real := time.Since(start)
	d, _ := t2.Sub(t1)
	if d < time.Duration(1.8*float64(real)) || d > time.Duration(2.2*float64(real))+20*time.Millisecond {
		t.Fatalf("at rate 2 the clock advanced %v in %v", d, real)
	}
	if p.nodeClock.Suspended(t1) {
		t.Fatal("a fast clock reports a suspend")
	}
	setFaults(t, c, 1, `{"clock_rate": 1}`)
	mustStatus(t, do(t, "PUT", c.url(1, "/v1/kv/a"), "b"), 200)
	a := do(t, "POST", c.url(1, "/debug/jepsen/faults"), `{"clock_rate": -1}`)
	mustStatus(t, a, 400)
}
