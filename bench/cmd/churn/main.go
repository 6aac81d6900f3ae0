// Command churn runs membership changes against a loaded cluster and
// prints what each cost: three log.Nodes in one process on bbolt files
// and loopback TCP, 64 writers calling the leader's Apply throughout,
// and a schedule of rounds, each adding a learner, promoting it, moving a
// follower to a new port (SetAddress), removing a follower, adding and
// promoting another learner, transferring leadership (for scale; no
// membership change), and removing the leader.
//
//	cd bench && go run ./cmd/churn [-rounds 5] [-writers 64]
//
// Its last line reads
//
//	churn: changes=N refused=N unknown=N max_leaderless_ms=N leader_removals_max_gap_ms=N
//
// refused counts the writes the process a writer took for the leader
// refused outside a leader removal; max_leaderless_ms is the longest
// stretch without a leader around a change that keeps the leader;
// leader_removals_max_gap_ms the longest around a removal of the leader.
// The line before it gives the same for the transfers, which a removal of
// the leader should not exceed:
//
//	transfers: n=N max_gap_ms=N
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/edictlog/edictlog/bench/churn"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds of the schedule (7 changes each, one of them a removal of the leader, and a transfer)")
	writers := flag.Int("writers", 64, "concurrent writers")
	pause := flag.Duration("pause", 200*time.Millisecond, "pause between changes")
	logPath := flag.String("log", "", "write the nodes' logs (JSON, with the changes' start and end) to this file")
	flag.Parse()
	var logger *slog.Logger
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		logger = slog.New(slog.NewJSONHandler(f, nil))
	}
	dir, err := os.MkdirTemp("", "churn")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fmt.Printf("3 nodes in one process, bbolt and fsync, loopback TCP, %d writers of 256-byte values; %d rounds of %v\n",
		*writers, *rounds, churn.Round)
	res, err := churn.Run(ctx, churn.Config{Dir: dir, Writers: *writers, Rounds: *rounds, Pause: *pause, Logger: logger})
	fmt.Printf("%4s %16s %6s %10s %14s  %s\n", "#", "change", "target", "call ms", "leaderless ms", "error")
	var maxKeep, maxRemoval time.Duration
	for i, ch := range res.Changes {
		e := ""
		if ch.Err != nil {
			e = ch.Err.Error()
		}
		fmt.Printf("%4d %16s %6v %10.1f %14.1f  %s\n", i+1, ch.Kind, ch.Target, ms(ch.Took), ms(ch.Leaderless), e)
		if ch.Kind.KeepsLeader() {
			maxKeep = max(maxKeep, ch.Leaderless)
		} else {
			maxRemoval = max(maxRemoval, ch.Leaderless)
		}
	}
	var maxTransfer time.Duration
	for _, ch := range res.Transfers {
		e := ""
		if ch.Err != nil {
			e = ch.Err.Error()
		}
		fmt.Printf("%4s %16s %6v %10.1f %14.1f  %s\n", "", ch.Kind, ch.Target, ms(ch.Took), ms(ch.Leaderless), e)
		maxTransfer = max(maxTransfer, ch.Leaderless)
	}
	fmt.Printf("writes=%d (%.0f/s) refused_during_leader_moves=%d failed=%d elapsed=%v\n",
		res.Writes, float64(res.Writes)/res.Elapsed.Seconds(), res.RemovalRefused, res.Failed, res.Elapsed.Round(time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
	}
	fmt.Printf("transfers: n=%d max_gap_ms=%.0f\n", len(res.Transfers), ms(maxTransfer))
	fmt.Printf("churn: changes=%d refused=%d unknown=%d max_leaderless_ms=%.0f leader_removals_max_gap_ms=%.0f\n",
		len(res.Changes), res.Refused, res.Unknown, ms(maxKeep), ms(maxRemoval))
	if err != nil {
		os.Exit(1)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "churn:", err)
	os.Exit(1)
}
