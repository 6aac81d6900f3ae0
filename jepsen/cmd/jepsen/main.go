// Command jepsen runs a Jepsen-style test of edictkv: real processes,
// real faults, a linearizability checker. See jepsen/README.md.
//
//	go run ./jepsen/cmd/jepsen --time 60s --nemesis partition,kill,pause,clock --workload register
//
// It ends with the verdict: valid (safe, and available within the bounds),
// invalid (the checker found an anomaly, or a node could not start again
// or crashed), unavailable (safe as far as the
// checker saw, but no node led for longer than --leader-bound after a
// fault ended, or a member was not ready within --ready-bound of the final
// heal), or unknown. Exit status: 0 when valid, 1 when invalid or
// unavailable, 2 when the test could not run or the checker could not
// decide.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/jepsen"
	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/nemesis"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o jepsen.Options
	nemeses := fs.String("nemesis", "partition,kill,pause,clock", "faults, comma-separated: "+nemesis.Known+"; none: no faults")
	fs.IntVar(&o.Nodes, "nodes", 5, "edictkv processes")
	fs.DurationVar(&o.Time, "time", 60*time.Second, "how long clients and faults run")
	fs.StringVar(&o.Workload, "workload", "register", "register (reads, writes, CAS per key), set (adds, then final reads) or watch (writers, and watchers on every member judged against the committed history)")
	fs.StringVar(&o.Read, "read", "lease", "the register workload's read level: lease, follower or stale")
	fs.BoolVar(&o.Strict, "strict", false, "check every read as linearizable, stale ones too (a control: stale reads are expected to fail it)")
	fs.BoolVar(&o.WatchSkipOnReconnect, "watch-skip-on-reconnect", false, "a test of the watch checker: every watcher leaves out the first event after its first reconnect, and the run must end invalid")
	fs.StringVar(&o.Out, "out", "", "report folder (default: jepsen-out/<time>)")
	fs.StringVar(&o.Mode, "mode", "auto", "netns (root: one network namespace per node), portable (127.0.0.1, faults through the test-only endpoint), or auto")
	fs.IntVar(&o.Clients, "clients", 10, "concurrent clients")
	fs.IntVar(&o.Keys, "keys", 8, "register keys, or the keys the watch workload's writers change")
	fs.Uint64Var(&o.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the operation mix and fault choices")
	fs.DurationVar(&o.Quiet, "quiet", 3*time.Second, "time without a fault between two faults")
	fs.DurationVar(&o.Hold, "hold", 6*time.Second, "how long each fault lasts")
	fs.DurationVar(&o.Lease, "lease", 0, "the nodes' --lease (0: edictkv's default)")
	fs.Uint64Var(&o.SnapshotEvery, "snapshot-every", 0, "the nodes' --snapshot-every (0: edictkv's default, or 128 with the snapshot-install nemesis)")
	fs.Float64Var(&o.Rho, "rho", 1e-3, "the nodes' --rho (the clock nemesis stays within it)")
	fs.StringVar(&o.Binary, "binary", "", "an edictkv built with -tags jepsen (default: build one)")
	fs.DurationVar(&o.CheckTimeout, "check-timeout", 2*time.Minute, "porcupine's time limit")
	fs.DurationVar(&o.LeaderBound, "leader-bound", check.DefaultLeaderBound, "after a fault ends (and at any time between faults) a node must lead within this, or the run is unavailable")
	fs.DurationVar(&o.ReadyBound, "ready-bound", check.DefaultReadyBound, "after the final heal every member must be ready (answer, know a leader, serve a follower read) within this, or the run is unavailable")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jepsen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *nemeses != "none" && *nemeses != "" {
		o.Nemeses = strings.Split(*nemeses, ",")
	}
	if o.Out == "" {
		o.Out = "jepsen-out/" + time.Now().Format("20060102-150405")
	}
	o.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := jepsen.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "jepsen: %v\n", err)
		if res.Valid == "" {
			return 2
		}
	}
	fmt.Fprintf(stdout, "verdict: %s  (workload %s, nemesis %v, %s mode, %.0fs, seed %d; report in %s)\n",
		res.Verdict, res.Workload, res.Nemeses, res.Mode, res.Seconds, res.Seed, o.Out)
	switch res.Valid {
	case check.Valid:
		fmt.Fprintln(stdout, "safety: valid (no anomaly found)")
	case check.Invalid:
		fmt.Fprintln(stdout, "safety: INVALID (the anomaly is below)")
	default:
		fmt.Fprintf(stdout, "safety: %s (the checker could not decide)\n", res.Valid)
	}
	fmt.Fprintf(stdout, "processes: %s\n", res.Processes.Summary())
	for _, f := range res.Processes.Failures {
		fmt.Fprintf(stdout, "process: %s\n", f)
	}
	for _, v := range res.Availability.Violations {
		fmt.Fprintf(stdout, "unavailable: %s\n", v)
	}
	fmt.Fprintf(stdout, "availability: %s\n", res.Availability.Summary())
	if m := res.Membership; m != nil {
		fmt.Fprintf(stdout, "membership: %s\n", m)
	}
	if s := res.Snapshots; s != nil && (s.Installed+s.Refused+s.Failed+s.Received > 0 || res.SnapshotEvery > 0) {
		every := "edictkv's default"
		if res.SnapshotEvery > 0 {
			every = fmt.Sprint(res.SnapshotEvery)
		}
		fmt.Fprintf(stdout, "snapshots: %d installed, %d refused by the receiver, %d failed (unreachable, cut off), %d handed to a receiver (snapshot-every: %s)\n",
			s.Installed, s.Refused, s.Failed, s.Received, every)
	}
	switch {
	case res.Register != nil && res.Register.Anomaly != "":
		fmt.Fprintf(stdout, "anomaly: %s\n", res.Register.Anomaly)
	case res.Set != nil:
		fmt.Fprintf(stdout, "set: %d acknowledged, %d lost, %d duplicated, %d unexpected, %d failed-but-present\n",
			res.Set.Acknowledged, len(res.Set.Lost), len(res.Set.Duplicated), len(res.Set.Unexpected), len(res.Set.FailedButPresent))
	case res.Watch != nil:
		fmt.Fprintf(stdout, "watch: %s\n", res.Watch.Summary())
		if o.WatchSkipOnReconnect {
			fmt.Fprintf(stdout, "watch: negative control: the watchers left out %d event(s) after reconnecting\n", res.WatchSkipped)
		}
		if res.Watch.Error != "" {
			fmt.Fprintf(stdout, "watch: %s\n", res.Watch.Error)
		}
		if res.Watch.Anomaly != "" {
			fmt.Fprintf(stdout, "anomaly: %s\n", res.Watch.Anomaly)
		}
	}
	return jepsen.ExitCode(res.Verdict)
}
