// Command failover measures how long an edictkv cluster takes to accept
// writes again after its leader is SIGKILLed: real processes, real TCP,
// the binary's default timings unless told otherwise.
//
//	go run ./jepsen/cmd/failover --kills 20
//	go run ./jepsen/cmd/failover --kills 20 --extra "--profile lan"
//
// Each round finds the leader, reads its lease (how long it still runs,
// /v1/status, and the renewal lead it holds it with, /metrics), kills it,
// and from the moment of the kill sends a write every 5 ms to the
// surviving processes (which forward to the leader they know, or wait for
// one); the failover time is from the kill to the first write that
// succeeds. The killed process is then restarted and the cluster left to
// settle before the next round. It prints every sample and p50, p90, p99
// and max; with 20 kills p99 is the largest sample but one, interpolated.
//
// Each sample is split where the processes' own records allow:
//
//	lease   what was left of the dead leader's lease when it died: its
//	        granters grant nothing to anyone else until their grants to
//	        it, which end a little after it, run out
//	elect   from then to the successor's reign being ready (its log's
//	        "became leader": the successor's detector names it, its lease
//	        attempt completes, its reign-start edict commits), including
//	        any attempt that collided and the back-off after it
//	client  from then to the first write accepted (the writer's 5 ms
//	        spacing, the survivors learning of the new leader, the write's
//	        own commit)
//
// The "lead" column is the renewal lead the dead leader held its lease
// with: above the configured lead it had seen stalls in the 30 to 60 s
// before and held a longer lease (docs/protocol.md, "The adaptive renewal
// lead").
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/jepsen/cluster"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kills := fs.Int("kills", 20, "leader kills to measure")
	nodes := fs.Int("nodes", 3, "edictkv processes")
	lease := fs.Duration("lease", 0, "the nodes' --lease (0: edictkv's default)")
	settle := fs.Duration("settle", 2*time.Second, "wait after a restart before the next kill")
	binary := fs.String("binary", "", "an edictkv built with -tags jepsen (default: build one)")
	repo := fs.String("repo", ".", "repository root to build from")
	extra := fs.String("extra", "", "extra serve arguments, space-separated")
	logs := fs.String("logs", "", "copy every process's log here at the end (default: removed with the data)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "edictkv-failover-")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	if *binary == "" {
		*binary = filepath.Join(dir, "edictkv")
		if err := cluster.Build(ctx, *repo, *binary); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	cfg := cluster.Config{N: *nodes, Binary: *binary, Dir: dir, Lease: *lease, Logger: logger}
	if *extra != "" {
		cfg.ExtraArgs = strings.Fields(*extra)
	}
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer c.Close()
	if *logs != "" {
		defer copyLogs(c, *logs, stderr)
	}

	var samples []sample
	for i := range *kills {
		s, err := measure(ctx, c, i)
		if err != nil {
			fmt.Fprintf(stderr, "round %d: %v\n", i+1, err)
			return 1
		}
		samples = append(samples, s)
		fmt.Fprintf(stdout, "kill %2d: writes again after %v (%s)\n", i+1, s.total.Round(time.Millisecond), s)
		time.Sleep(*settle)
	}
	what := fmt.Sprintf("%d processes, lease %v", *nodes, leaseName(*lease))
	if *extra != "" {
		what += ", " + *extra
	}
	totals := column(samples, func(s sample) time.Duration { return s.total })
	fmt.Fprintf(stdout, "failover over %d leader kills (%s): p50 %v, p90 %v, p99 %v, max %v\n",
		len(samples), what, pct(totals, 50), pct(totals, 90), pct(totals, 99), totals[len(totals)-1].Round(time.Millisecond))
	for _, part := range []struct {
		name string
		get  func(sample) time.Duration
	}{
		{"lease left at the kill", func(s sample) time.Duration { return s.lease }},
		{"lease end to reign ready", func(s sample) time.Duration { return s.elect() }},
		{"reign ready to first write", func(s sample) time.Duration { return s.client() }},
		{"renewal lead of the dead leader", func(s sample) time.Duration { return s.lead }},
	} {
		var known []sample
		for _, s := range samples {
			if s.known() {
				known = append(known, s)
			}
		}
		if len(known) == 0 {
			continue
		}
		col := column(known, part.get)
		fmt.Fprintf(stdout, "  %-32s p50 %v, p90 %v, p99 %v, max %v (%d kills)\n", part.name+":",
			pct(col, 50), pct(col, 90), pct(col, 99), col[len(col)-1].Round(time.Millisecond), len(col))
	}
	lowest := 0
	for _, s := range samples {
		if s.successor == s.lowestSurvivor {
			lowest++
		}
	}
	fmt.Fprintf(stdout, "  successor was the lowest-id survivor in %d of %d kills\n", lowest, len(samples))
	return 0
}

// sample is one kill's failover and its parts.
type sample struct {
	total time.Duration // kill to first accepted write
	// lease is what the dead leader's lease had left at the kill, lead the
	// renewal lead it held it with (-1: not read).
	lease, lead time.Duration
	// ready is kill to the successor's "became leader" (-1: not found).
	ready                    time.Duration
	leader, successor        int
	lowestSurvivor           int
	leaseAt, killAt, wroteAt time.Time
	leaseErr, readyErr       string
}

func (s sample) known() bool { return s.lease >= 0 && s.ready >= 0 && s.lead >= 0 }

func (s sample) elect() time.Duration  { return s.ready - max(s.lease, 0) }
func (s sample) client() time.Duration { return s.total - s.ready }

func (s sample) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leader %d -> %d", s.leader, s.successor)
	if s.lease >= 0 {
		fmt.Fprintf(&b, "; lease left %v", s.lease.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "; lease left unknown: %s", s.leaseErr)
	}
	if s.lead >= 0 {
		fmt.Fprintf(&b, " (lead %v)", s.lead.Round(time.Millisecond))
	}
	if s.ready >= 0 {
		fmt.Fprintf(&b, "; reign ready at %v", s.ready.Round(time.Millisecond))
		if s.lease >= 0 {
			fmt.Fprintf(&b, " (%v after the lease)", s.elect().Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "; write %v later", s.client().Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "; reign ready unknown: %s", s.readyErr)
	}
	return b.String()
}

func column(samples []sample, get func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		out = append(out, get(s))
	}
	slices.Sort(out)
	return out
}

func leaseName(d time.Duration) string {
	if d == 0 {
		return "default"
	}
	return d.String()
}

// pct is the p-th percentile of sorted samples, interpolated between the
// two nearest ranks.
func pct(sorted []time.Duration, p float64) time.Duration {
	r := p / 100 * float64(len(sorted)-1)
	lo, hi := int(math.Floor(r)), int(math.Ceil(r))
	v := float64(sorted[lo]) + (r-float64(lo))*float64(sorted[hi]-sorted[lo])
	return time.Duration(v).Round(time.Millisecond)
}

// measure kills the leader, times the first write the survivors accept,
// splits the time (sample), and restarts the killed process.
func measure(ctx context.Context, c *cluster.Cluster, round int) (sample, error) {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s := sample{lease: -1, lead: -1, ready: -1}
	client := &http.Client{Timeout: time.Second}
	// The leader, its lead (a scrape takes a few ms), then its lease, read
	// as close to the kill as a request allows. A leader that says it no
	// longer leads (its lease just lapsed) is looked for again.
	var leader int
	for try := 0; ; try++ {
		var err error
		if leader, err = c.WaitLeader(wctx); err != nil {
			return s, err
		}
		ln := c.Node(leader)
		if ln == nil {
			return s, fmt.Errorf("no node %d", leader)
		}
		s.lead = renewLead(wctx, client, ln)
		left, at, err := leaseLeft(wctx, client, ln)
		if err == nil {
			s.lease, s.leaseAt, s.leaseErr = left, at, ""
			break
		}
		s.leaseErr = err.Error()
		if try == 4 {
			break // kill it all the same; the sample says the lease is unknown
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.leader = leader
	var survivors []*cluster.Node
	for _, n := range c.Nodes() {
		if n.ID != leader {
			survivors = append(survivors, n)
			if s.lowestSurvivor == 0 {
				s.lowestSurvivor = n.ID
			}
		}
	}
	start := time.Now()
	s.killAt = start
	if err := c.Kill(leader); err != nil {
		return s, err
	}
	if s.lease >= 0 {
		s.lease = max(s.lease-start.Sub(s.leaseAt), 0)
	}
	for k := 0; ; k++ {
		if wctx.Err() != nil {
			return s, fmt.Errorf("no write accepted within 30s of killing leader %d", leader)
		}
		n := survivors[k%len(survivors)]
		url := fmt.Sprintf("%s/v1/kv/failover-%d", n.URL(), round)
		req, err := http.NewRequestWithContext(wctx, http.MethodPut, url, strings.NewReader(fmt.Sprint(k)))
		if err != nil {
			return s, err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.wroteAt = time.Now()
				s.total = s.wroteAt.Sub(start)
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The successor's "became leader": the first after the kill in a
	// survivor's log (its JSON log's time, this host's clock).
	var first time.Time
	for _, n := range survivors {
		at, err := becameLeader(n.LogPath, start)
		if err != nil {
			s.readyErr = err.Error()
			continue
		}
		if !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first, s.successor = at, n.ID
		}
	}
	if !first.IsZero() {
		s.ready = first.Sub(start)
	} else if s.readyErr == "" {
		s.readyErr = "no survivor logged \"became leader\" after the kill"
	}
	if err := c.Restart(leader); err != nil {
		return s, fmt.Errorf("restart %d: %w", leader, err)
	}
	return s, nil
}

// leaseLeft asks the leader how long its lease still runs, and when it
// answered (the answer's arrival: the lease can only have been shorter
// by then).
func leaseLeft(ctx context.Context, client *http.Client, n *cluster.Node) (time.Duration, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/status", nil)
	if err != nil {
		return 0, time.Time{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer resp.Body.Close()
	var st kvjson.StatusJSON
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, time.Time{}, fmt.Errorf("/v1/status: %w", err)
	}
	at := time.Now()
	if !st.IsLeader || st.LeaseRemainingMS == nil {
		return 0, at, errors.New("/v1/status: not leading when read")
	}
	return time.Duration(*st.LeaseRemainingMS) * time.Millisecond, at, nil
}

// renewLead reads edictkv_lease_renew_lead_seconds from n's /metrics (-1
// if it cannot).
func renewLead(ctx context.Context, client *http.Client, n *cluster.Node) time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && name == "edictkv_lease_renew_lead_seconds" {
			if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				return time.Duration(v * float64(time.Second))
			}
		}
	}
	return -1
}

// becameLeader finds the first "became leader" record after since in a
// process's JSON log (zero if none).
func becameLeader(path string, since time.Time) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' || !strings.Contains(string(line), `"became leader"`) {
			continue
		}
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Msg != "became leader" {
			continue
		}
		if rec.Time.After(since) {
			return rec.Time, nil
		}
	}
	return time.Time{}, sc.Err()
}

// copyLogs copies every process's log into dir.
func copyLogs(c *cluster.Cluster, dir string, stderr io.Writer) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		fmt.Fprintln(stderr, err)
		return
	}
	for _, n := range c.Nodes() {
		b, err := os.ReadFile(n.LogPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(n.LogPath)), b, 0o640)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
		}
	}
}
