// Command logcmp runs edictlog's log.Node and hashicorp/raft side by side
// on this machine, interleaved, and prints committed writes per second,
// p50/p99 write latency and the ratio, for 1 and 64 writers.
//
//	cd bench && go run ./cmd/logcmp [-d 5s] [-rounds 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/edictlog/edictlog/bench/logcmp"
)

func main() {
	d := flag.Duration("d", 5*time.Second, "how long each measurement runs")
	rounds := flag.Int("rounds", 3, "interleaved rounds per system and writer count (the median is reported)")
	flag.Parse()
	fmt.Printf("3 nodes in one process each, fsync on, loopback TCP, 256-byte values; %d rounds of %v, interleaved\n", *rounds, *d)
	fmt.Printf("%8s %16s %12s %10s %10s %8s\n", "writers", "system", "writes/s", "p50", "p99", "ratio")
	for _, writers := range []int{1, 64} {
		res := map[string][]logcmp.Result{}
		for range *rounds {
			for _, system := range []string{"edictlog", "hashicorp-raft"} {
				dir, err := os.MkdirTemp("", "logcmp")
				if err != nil {
					fail(err)
				}
				r, err := logcmp.Run(system, dir, writers, *d)
				os.RemoveAll(dir)
				if err != nil {
					fail(err)
				}
				res[system] = append(res[system], r)
			}
		}
		med := map[string]logcmp.Result{}
		for system, rs := range res {
			slices.SortFunc(rs, func(a, b logcmp.Result) int { return int(a.PerSecond() - b.PerSecond()) })
			med[system] = rs[len(rs)/2]
		}
		for _, system := range []string{"edictlog", "hashicorp-raft"} {
			r := med[system]
			ratio := ""
			if system == "hashicorp-raft" {
				ratio = fmt.Sprintf("%.2fx", med["edictlog"].PerSecond()/r.PerSecond())
			}
			fmt.Printf("%8d %16s %12.0f %10v %10v %8s\n", writers, system, r.PerSecond(), r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), ratio)
		}
	}
	fmt.Println("ratio = edictlog writes/s ÷ hashicorp/raft writes/s (medians)")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "logcmp:", err)
	os.Exit(1)
}
