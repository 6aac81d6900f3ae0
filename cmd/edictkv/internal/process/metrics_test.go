package process

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// scrape reads process id's /metrics into a map from each sample's name
// with its labels, as the text format writes them, to its value.
func scrape(t *testing.T, c *testCluster, id edict.ProcessID) map[string]float64 {
	t.Helper()
	a := do(t, http.MethodGet, c.url(id, "/metrics"), "")
	mustStatus(t, a, http.StatusOK)
	out := map[string]float64{}
	for _, line := range strings.Split(string(a.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// metric is one sample of a scrape; the test fails if it is missing.
func metric(t *testing.T, m map[string]float64, name string) float64 {
	t.Helper()
	v, ok := m[name]
	if !ok {
		t.Fatalf("no sample %s in /metrics", name)
	}
	return v
}

// The Node's lease and storage statistics reach /metrics, read at scrape
// time: renewals at the leader, each peer's last grant, leases lost by
// cause (a transfer releases one), the unsynced backlog, shed appends and
// throttles; and each process counts the changes of leader it saw.
func TestNodeStatsMetrics(t *testing.T) {
	c := startCluster(t, 3, nil)
	first := c.leader()
	other := c.follower(first)
	mustStatus(t, do(t, http.MethodPut, c.url(first, "/v1/kv/a"), "1"), http.StatusOK)

	// Renewals follow each other a fraction of a lease apart; grants come
	// back with each.
	// Every peer's grant is counted, the quorum's and the late one's.
	var m map[string]float64
	eventually(t, "the leader to renew its lease, granted by every peer", func() bool {
		m = scrape(t, c, first)
		if metric(t, m, "edictkv_lease_renewals_total") < 2 {
			return false
		}
		for id := range c.procs {
			if _, ok := m[fmt.Sprintf(`edictkv_lease_grant_age_seconds{peer="%d"}`, id)]; id != first && !ok {
				return false
			}
		}
		return true
	})
	for id := range c.procs {
		if id == first {
			continue
		}
		age := metric(t, m, fmt.Sprintf(`edictkv_lease_grant_age_seconds{peer="%d"}`, id))
		// A lease is 620 ms; renewals come well within it. Generous: the
		// machine is shared.
		if age < 0 || age > 5 {
			t.Errorf("peer %d last granted %gs ago, at a leader that renews", id, age)
		}
	}
	for _, name := range []string{`edictkv_leases_lost_total{cause="expired"}`, `edictkv_leases_lost_total{cause="released"}`,
		`edictkv_leases_lost_total{cause="suspended"}`, "edictkv_leases_lost_late_total", "edictkv_lease_renewals_late_total", "edictkv_unsynced_entries",
		"edictkv_unsynced_bytes", "edictkv_slow_writes_total", "edictkv_appends_shed_total", "edictkv_proposals_throttled_total"} {
		if v := metric(t, m, name); v != 0 && !strings.HasPrefix(name, "edictkv_lease_renewals_late") && !strings.HasPrefix(name, "edictkv_unsynced") {
			// Nothing was lost, shed or throttled, and no write on a
			// healthy disk took a quarter lease (late renewals and a
			// backlog in flight can happen on a loaded machine).
			t.Errorf("%s = %g on a healthy cluster", name, v)
		}
	}
	// The renewal lead is the configuration's (0.27 s) at least, and up
	// to the longest lease (0.62 s) less the renewals' spacing: twice the
	// longest stall seen lately, if a busy machine stalled the process.
	if lead, stall := metric(t, m, "edictkv_lease_renew_lead_seconds"), metric(t, m, "edictkv_lease_stall_seconds"); lead < 0.27 || lead > 0.58 || stall < 0 {
		t.Errorf("renewal lead %gs with stalls of up to %gs seen", lead, stall)
	}
	if v := metric(t, m, "edictkv_leader_changes_seen_total"); v != 1 {
		t.Errorf("the first leader saw %g changes of leader, want 1 (itself)", v)
	}

	mustStatus(t, do(t, http.MethodPost, c.url(first, "/v1/cluster/transfer"), fmt.Sprintf(`{"id":%d}`, other)), http.StatusOK)
	eventually(t, fmt.Sprintf("process %d leads", other), func() bool { return c.procs[other].Node.Status().IsLeader })
	eventually(t, "the old leader to count its lease released", func() bool {
		return metric(t, scrape(t, c, first), `edictkv_leases_lost_total{cause="released"}`) >= 1
	})
	// Every process saw the first leader and then the second: two
	// changes (the old leader saw itself step down, then the new one).
	for id := range c.procs {
		eventually(t, fmt.Sprintf("process %d to see the new leader", id), func() bool {
			return metric(t, scrape(t, c, id), "edictkv_leader_changes_seen_total") == 2
		})
	}
}

// The append histogram resolves what a slow disk looks like, from a
// millisecond to seconds, with buckets at most a factor of two apart.
func TestAppendHistogramBuckets(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.leader()
	mustStatus(t, do(t, http.MethodPut, c.url(1, "/v1/kv/a"), "1"), http.StatusOK)
	var bounds []float64
	for name := range scrape(t, c, 1) {
		le, ok := strings.CutPrefix(name, `edictkv_append_seconds_bucket{le="`)
		if !ok || strings.HasPrefix(le, "+Inf") {
			continue
		}
		b, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64)
		if err != nil {
			t.Fatal(err)
		}
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || bounds[0] > 0.001 || bounds[len(bounds)-1] < 5 {
		t.Fatalf("append buckets %v do not span 1 ms to 5 s", bounds)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i]/bounds[i-1] > 2+1e-9 {
			t.Fatalf("append buckets %g and %g are more than a factor of 2 apart", bounds[i-1], bounds[i])
		}
	}
}

// A change of leader is counted as etcd counts it: to another process, or
// to the same one after a time with none; never to none.
func TestLeaderChangeCounting(t *testing.T) {
	c := &leaderCounter{}
	for _, p := range []edict.ProcessID{0, 1, 1, 0, 1, 2, 2, 3, 0, 0, 3} {
		c.seeLeader(p)
	}
	if got := c.changeCount(); got != 5 {
		t.Fatalf("counted %g changes, want 5 (→1, →1 after none, →2, →3, →3 after none)", got)
	}
	st := edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(time.Second)}}}}
	c.seeReign(st)
	c.seeReign(st)
	if got := c.reignCount(); got != 1 {
		t.Fatalf("one reign seen twice counted %g times", got)
	}
}

// The state's revisions, size and keys, and its watchers, reach /metrics:
// an HTTP watch counts as a stream with a synced watcher once it has
// caught up, and the events it was sent are counted.
func TestStateMetrics(t *testing.T) {
	c := startCluster(t, 1, nil)
	id := c.leader()
	for _, k := range []string{"a", "b", "a"} {
		mustStatus(t, do(t, http.MethodPut, c.url(id, "/v1/kv/"+k), "1"), http.StatusOK)
	}
	m := scrape(t, c, id)
	if rev, keys := metric(t, m, "edictkv_state_revision"), metric(t, m, "edictkv_state_keys"); rev != 4 || keys != 2 {
		t.Fatalf("after three puts on two keys: revision %v, keys %v", rev, keys)
	}
	if size, inUse := metric(t, m, "edictkv_state_db_size_bytes"), metric(t, m, "edictkv_state_db_size_in_use_bytes"); inUse <= 0 || size < inUse {
		t.Fatalf("db size %v, in use %v", size, inUse)
	}
	if v := metric(t, m, "edictkv_state_compact_revision"); v != -1 {
		t.Fatalf("compact revision before any compaction: %v", v)
	}
	if v := metric(t, m, "edictkv_watch_streams"); v != 0 {
		t.Fatalf("watch streams before any watch: %v", v)
	}

	resp, err := http.Get(c.url(id, "/v1/watch/a?from=2"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	eventually(t, "the watch from revision 2 to be sent its two events and be synced", func() bool {
		m = scrape(t, c, id)
		return metric(t, m, "edictkv_watch_streams") == 1 && metric(t, m, `edictkv_watchers{state="synced"}`) == 1 &&
			metric(t, m, "edictkv_watch_events_total") == 2
	})
	for _, name := range []string{`edictkv_watchers{state="unsynced"}`, `edictkv_watchers{state="parked"}`,
		"edictkv_watch_parked_events", "edictkv_watchers_compacted_total"} {
		if v := metric(t, m, name); v != 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
}

// The log's store reports the disk it holds: a new data directory's
// WALStore holds at least its first segment, allocated whole; and no write
// was cut short.
func TestLogStoreMetrics(t *testing.T) {
	c := startCluster(t, 1, nil)
	id := c.leader()
	mustStatus(t, do(t, http.MethodPut, c.url(id, "/v1/kv/a"), "1"), http.StatusOK)
	m := scrape(t, c, id)
	if b := metric(t, m, "edictkv_log_store_bytes"); b < 64<<20 {
		t.Errorf("edictkv_log_store_bytes %g, want at least one 64 MiB segment", b)
	}
	if b := metric(t, m, "edictkv_log_store_cut_short_bytes"); b != 0 {
		t.Errorf("edictkv_log_store_cut_short_bytes %g after a clean start", b)
	}
}
