package process

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// The tests of the HTTP API (internal/httpapi) end to end: they need
// running Nodes with peers to forward to, which this package assembles.

// Writes on any process, reads at every level on every process, with the
// index and the value's stamp in headers and JSON.
func TestWriteAnywhereReadEverywhere(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.leader()
	for id := range c.procs {
		key := fmt.Sprintf("k%d", id)
		a := do(t, http.MethodPut, c.url(id, "/v1/kv/"+key), "v"+key)
		mustStatus(t, a, http.StatusOK)
		var w kvjson.WriteResponse
		a.json(t, &w)
		if w.Index == 0 || a.header.Get(kvjson.HeaderIndex) != fmt.Sprint(w.Index) || a.header.Get(kvjson.HeaderStamp) != w.Stamp.Token {
			t.Fatalf("write via %d: index %d, headers %v", id, w.Index, a.header)
		}
		if id != leader && a.header.Get(kvjson.HeaderServedBy) != fmt.Sprint(uint64(leader)) {
			t.Fatalf("write via follower %d served by %q, want the leader %d", id, a.header.Get(kvjson.HeaderServedBy), leader)
		}
		for rid := range c.procs {
			for _, level := range []string{"lease", "follower", "stale"} {
				var g kvjson.GetResponse
				// A stale read may lag; the others must see the write at once.
				eventually(t, "read "+key+" at "+level, func() bool {
					r := do(t, http.MethodGet, c.url(rid, "/v1/kv/"+key+"?consistency="+level), "")
					if r.status != http.StatusOK {
						if level != "stale" {
							t.Fatalf("%s read of %s via %d: %d %s", level, key, rid, r.status, r.body)
						}
						return false
					}
					r.json(t, &g)
					return true
				})
				if g.Value == nil || *g.Value != "v"+key || g.ModIndex != w.Index || g.Stamp.Token != w.Stamp.Token || g.Index < w.Index {
					t.Fatalf("%s read via %d: %+v, want value v%s at mod index %d", level, rid, g, key, w.Index)
				}
			}
		}
		tok, err := base64.RawURLEncoding.DecodeString(w.Stamp.Token)
		if err != nil {
			t.Fatal(err)
		}
		st, err := edict.DecodeStamp(tok)
		if err != nil || st.Epoch != w.Stamp.Epoch || st.Counter != w.Stamp.Counter {
			t.Fatalf("stamp token decodes to %v, %v; JSON says %+v", st, err, w.Stamp)
		}
	}
	// A missing key is a 404 with the index it was read at.
	a := do(t, http.MethodGet, c.url(leader, "/v1/kv/missing"), "")
	mustStatus(t, a, http.StatusNotFound)
	if e := a.errorBody(t); e.Code != kvjson.CodeNotFound || e.Index == 0 {
		t.Fatalf("404 body %+v", e)
	}
	// Delete, then the key is gone; deleting again is a 404.
	mustStatus(t, do(t, http.MethodDelete, c.url(c.follower(leader), "/v1/kv/k1"), ""), http.StatusOK)
	mustStatus(t, do(t, http.MethodGet, c.url(leader, "/v1/kv/k1"), ""), http.StatusNotFound)
	mustStatus(t, do(t, http.MethodDelete, c.url(leader, "/v1/kv/k1"), ""), http.StatusNotFound)
}

func TestCompareAndSwap(t *testing.T) {
	c := startCluster(t, 3, nil)
	f := c.follower(c.leader())
	url := c.url(f, "/v1/kv/lock")
	// cas=0 creates only.
	a := do(t, http.MethodPut, url+"?cas=0", "one")
	mustStatus(t, a, http.StatusOK)
	var first kvjson.WriteResponse
	a.json(t, &first)
	a = do(t, http.MethodPut, url+"?cas=0", "two")
	mustStatus(t, a, http.StatusConflict)
	e := a.errorBody(t)
	if e.Code != kvjson.CodeCASFailed || e.Current == nil || *e.Current.Value != "one" || e.Current.ModIndex != first.Index {
		t.Fatalf("409 body %+v", e)
	}
	// By index: the current mod index wins, a stale one loses.
	mustStatus(t, do(t, http.MethodPut, fmt.Sprintf("%s?cas=%d", url, first.Index), "three"), http.StatusOK)
	mustStatus(t, do(t, http.MethodPut, fmt.Sprintf("%s?cas=%d", url, first.Index), "four"), http.StatusConflict)
	// By value.
	mustStatus(t, do(t, http.MethodPut, url+"?prev=nope", "five"), http.StatusConflict)
	mustStatus(t, do(t, http.MethodPut, url+"?prev=three", "six"), http.StatusOK)
	var g kvjson.GetResponse
	a = do(t, http.MethodGet, url, "")
	mustStatus(t, a, http.StatusOK)
	a.json(t, &g)
	if *g.Value != "six" || g.Version != 3 {
		t.Fatalf("after CAS: %+v", g)
	}
}

func TestRedirectToLeader(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.leader()
	f := c.follower(leader)
	a := do(t, http.MethodPut, c.url(f, "/v1/kv/r?redirect"), "x")
	mustStatus(t, a, http.StatusTemporaryRedirect)
	if want := c.url(leader, "/v1/kv/r?redirect"); a.header.Get("Location") != want {
		t.Fatalf("Location %q, want %q", a.header.Get("Location"), want)
	}
	mustStatus(t, do(t, http.MethodGet, c.url(leader, "/v1/kv/r"), ""), http.StatusNotFound) // not written
	mustStatus(t, do(t, http.MethodPut, a.header.Get("Location"), "x"), http.StatusOK)
}

// With no quorum there is no leader: a write or a linearizable read waits
// LeaderWait, then 503 with Retry-After; the process is live but not
// ready.
func TestNoLeader(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.LeaderWait = 300 * time.Millisecond })
	leader := c.leader()
	// Stop two processes; the third cannot lead alone.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var alive edict.ProcessID
	for id, p := range c.procs {
		if alive == 0 && id != leader {
			alive = id
			continue
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		delete(c.procs, id)
	}
	var a answer
	eventually(t, "503 from the lone process", func() bool {
		a = do(t, http.MethodPut, c.url(alive, "/v1/kv/x"), "y")
		return a.status == http.StatusServiceUnavailable
	})
	if a.header.Get("Retry-After") == "" || a.errorBody(t).Code != kvjson.CodeNoLeader {
		t.Fatalf("503 without Retry-After or code: %v %s", a.header, a.body)
	}
	// A linearizable read waits LeaderWait for a leader too (the Node's
	// MaxLeaderWait), not kvservice's 10 s write timeout: well under it,
	// even on a busy machine.
	began := time.Now()
	g := do(t, http.MethodGet, c.url(alive, "/v1/kv/x"), "")
	if took := time.Since(began); g.status != http.StatusServiceUnavailable || g.errorBody(t).Code != kvjson.CodeNoLeader || took > 8*time.Second {
		t.Fatalf("linearizable read without a leader: %d %s after %v", g.status, g.body, took)
	}
	mustStatus(t, do(t, http.MethodGet, c.url(alive, "/livez"), ""), http.StatusOK)
	// A write can give up on an unreachable leader before the lone
	// process stops believing in that leader's lease: readiness follows
	// the lease, so it may take until the lease lapses.
	var r answer
	eventually(t, "readyz 503 on the lone process", func() bool {
		r = do(t, http.MethodGet, c.url(alive, "/readyz"), "")
		return r.status == http.StatusServiceUnavailable
	})
	if !strings.Contains(string(r.body), "no leader") {
		t.Fatalf("readyz body %q", r.body)
	}
}

func TestClusterStatusAndMetrics(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.leader()
	f := c.follower(leader)
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/m"), "1"), http.StatusOK)
	eventually(t, "stale read of m", func() bool {
		return do(t, http.MethodGet, c.url(f, "/v1/kv/m?consistency=stale"), "").status == http.StatusOK
	})
	eventually(t, "every process ready", func() bool {
		for id := range c.procs {
			if do(t, http.MethodGet, c.url(id, "/readyz"), "").status != http.StatusOK {
				return false
			}
		}
		return true
	})
	var cl kvjson.ClusterJSON
	a := do(t, http.MethodGet, c.url(leader, "/v1/cluster"), "")
	mustStatus(t, a, http.StatusOK)
	a.json(t, &cl)
	if cl.Leader != uint64(leader) || cl.LeaseRemainingMS == nil || *cl.LeaseRemainingMS <= 0 || len(cl.Members) != 3 {
		t.Fatalf("cluster view %s", a.body)
	}
	for _, m := range cl.Members {
		if m.Status == nil || m.Match == nil || m.HTTPAddr != c.procs[edict.ProcessID(m.ID)].HTTPAddr() {
			t.Fatalf("member %d: %s", m.ID, a.body)
		}
	}
	m := string(do(t, http.MethodGet, c.url(f, "/metrics"), "").body)
	for _, want := range []string{"edictkv_is_leader 0", "edictkv_commit_index", "edictkv_applied_index",
		`edictkv_reads_total{level="stale"}`, `edictkv_forwarded_total{how="proxy"} 1`,
		"edictkv_append_seconds_bucket", "edictkv_fsyncs_total", "edictkv_lease_remaining_seconds 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("follower metrics lack %q", want)
		}
	}
	lm := string(do(t, http.MethodGet, c.url(leader, "/metrics"), "").body)
	for _, want := range []string{"edictkv_is_leader 1", "edictkv_reigns_started_total 1", "edictkv_commit_seconds_count 1"} {
		if !strings.Contains(lm, want) {
			t.Errorf("leader metrics lack %q:\n%s", want, lm)
		}
	}
}

// A read at a revision: the current one is answered, any other refused
// with the current revision named, for there is no history yet.
func TestReadAtRevision(t *testing.T) {
	c := startCluster(t, 3, nil)
	f := c.follower(c.leader())
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/r"), "1"), http.StatusOK)
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/r"), "2"), http.StatusOK)
	var current uint64
	eventually(t, "a read at the current revision, then at the one before", func() bool {
		a := do(t, http.MethodGet, c.url(f, "/v1/kv/r"), "")
		mustStatus(t, a, http.StatusOK)
		var g kvjson.GetResponse
		a.json(t, &g)
		if *g.Value != "2" {
			return false // a follower catching up
		}
		at := do(t, http.MethodGet, c.url(f, fmt.Sprintf("/v1/kv/r?revision=%d", g.ModIndex-1)), "")
		mustStatus(t, at, http.StatusOK)
		var old kvjson.GetResponse
		at.json(t, &old)
		if *old.Value != "1" {
			t.Fatalf("the value before the last write is %q", *old.Value)
		}
		current = g.Index
		return true
	})
	// A compaction at the current revision: the one before is gone.
	data, err := (&kvstate.Request{Compaction: &pb.CompactionRequest{Revision: int64(current)}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.procs[c.leader()].Node.Apply(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower applied the compaction", func() bool {
		a := do(t, http.MethodGet, c.url(f, fmt.Sprintf("/v1/kv/r?revision=%d", current-1)), "")
		if a.status == http.StatusOK {
			return false
		}
		mustStatus(t, a, http.StatusGone)
		if e := a.errorBody(t); e.Code != kvjson.CodeCompacted || e.Index < current {
			t.Fatalf("410 body %+v", e)
		}
		return true
	})
	a := do(t, http.MethodGet, c.url(f, fmt.Sprintf("/v1/kv/r?revision=%d&consistency=stale", current+1000)), "")
	mustStatus(t, a, http.StatusBadRequest)
	if e := a.errorBody(t); e.Code != kvjson.CodeFutureRevision {
		t.Fatalf("400 body %+v", e)
	}
}

// A write sent to a follower is answered once the follower has applied it
// too, as its gRPC writes are (and etcd's members answer theirs): a stale
// read there right after the answer sees it, and the leader tells the
// follower of the commit at once rather than with its next heartbeat.
func TestWriteViaFollowerIsReadThereAtOnce(t *testing.T) {
	c := startCluster(t, 3, nil)
	f := c.follower(c.leader())
	for i := range 20 {
		key, want := fmt.Sprintf("ryw%d", i), fmt.Sprintf("v%d", i)
		a := do(t, http.MethodPut, c.url(f, "/v1/kv/"+key), want)
		mustStatus(t, a, http.StatusOK)
		r := do(t, http.MethodGet, c.url(f, "/v1/kv/"+key+"?consistency=stale"), "")
		if r.status != http.StatusOK {
			t.Fatalf("write %d: a stale read at follower %d right after its answer: %d %s", i, f, r.status, r.body)
		}
		var g kvjson.GetResponse
		r.json(t, &g)
		if g.Value == nil || *g.Value != want {
			t.Fatalf("write %d: stale read at follower %d: %+v, want %q", i, f, g, want)
		}
	}
}
