// Command failover measures how long an edictkv cluster takes to accept
// writes again after its leader is SIGKILLed: real processes, real TCP,
// the binary's default timings unless told otherwise.
//
//	go run ./jepsen/cmd/failover --kills 20
//
// Each round finds the leader, kills it, and from the moment of the kill
// sends a write every 5 ms to the surviving processes (which forward to
// the leader they know, or answer 503 while none is known); the failover
// time is from the kill to the first write that succeeds. The killed
// process is then restarted and the cluster left to settle before the
// next round. It prints every sample and p50, p90, p99 and max; with 20
// kills p99 is the largest sample but one, interpolated.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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

	var samples []time.Duration
	for i := range *kills {
		d, err := measure(ctx, c, i)
		if err != nil {
			fmt.Fprintf(stderr, "round %d: %v\n", i+1, err)
			return 1
		}
		samples = append(samples, d)
		fmt.Fprintf(stdout, "kill %2d: writes again after %v\n", i+1, d.Round(time.Millisecond))
		time.Sleep(*settle)
	}
	slices.Sort(samples)
	fmt.Fprintf(stdout, "failover over %d leader kills (%d processes, lease %v): p50 %v, p90 %v, p99 %v, max %v\n",
		len(samples), *nodes, leaseName(*lease), pct(samples, 50), pct(samples, 90), pct(samples, 99), samples[len(samples)-1].Round(time.Millisecond))
	return 0
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
// and restarts the killed process.
func measure(ctx context.Context, c *cluster.Cluster, round int) (time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(wctx)
	if err != nil {
		return 0, err
	}
	var survivors []*cluster.Node
	for _, n := range c.Nodes() {
		if n.ID != leader {
			survivors = append(survivors, n)
		}
	}
	client := &http.Client{Timeout: time.Second}
	start := time.Now()
	if err := c.Kill(leader); err != nil {
		return 0, err
	}
	for k := 0; ; k++ {
		if wctx.Err() != nil {
			return 0, fmt.Errorf("no write accepted within 30s of killing leader %d", leader)
		}
		n := survivors[k%len(survivors)]
		url := fmt.Sprintf("%s/v1/kv/failover-%d", n.URL(), round)
		req, err := http.NewRequestWithContext(wctx, http.MethodPut, url, strings.NewReader(fmt.Sprint(k)))
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				d := time.Since(start)
				if err := c.Restart(leader); err != nil {
					return 0, fmt.Errorf("restart %d: %w", leader, err)
				}
				return d, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
