// Command logcmp runs edictlog.Node and hashicorp/raft side by side
// on this machine, interleaved, and prints committed writes per second,
// p50/p99 write latency and the ratio, for 1 and 64 writers.
//
//	cd bench && go run ./cmd/logcmp [-d 5s] [-rounds 3]
//
// To see where the time goes, -cpuprofile and -memprofile write Go's
// profiles of the whole run (all three nodes are in this process), and
// -systems and -writers narrow it, e.g.
//
//	go run ./cmd/logcmp -systems edictlog -writers 64 -cpuprofile cpu.out
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edictlog/edictlog/bench/logcmp"
)

func main() {
	d := flag.Duration("d", 5*time.Second, "how long each measurement runs")
	rounds := flag.Int("rounds", 3, "interleaved rounds per system and writer count (the median is reported)")
	systemList := flag.String("systems", "edictlog,hashicorp-raft", "systems to measure, comma-separated: edictlog (on storage.WALStore), edictlog-bolt (on storage.BoltStore), hashicorp-raft")
	writerList := flag.String("writers", "1,64", "writer counts, comma-separated")
	value := flag.Int("value", 256, "the size of each write's value in bytes")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	flag.Parse()
	logcmp.ValueSize = *value
	systems := strings.Split(*systemList, ",")
	var writerCounts []int
	for _, w := range strings.Split(*writerList, ",") {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			fail(fmt.Errorf("-writers: %q is not a positive count", w))
		}
		writerCounts = append(writerCounts, n)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				fail(err)
			}
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fail(err)
			}
			f.Close()
		}()
	}
	fmt.Printf("3 nodes in one process each, fsync on, loopback TCP, 256-byte values; %d rounds of %v, interleaved\n", *rounds, *d)
	fmt.Printf("%8s %16s %12s %10s %10s %8s\n", "writers", "system", "writes/s", "p50", "p99", "ratio")
	for _, writers := range writerCounts {
		res := map[string][]logcmp.Result{}
		for range *rounds {
			for _, system := range systems {
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
		for _, system := range systems {
			r := med[system]
			ratio := ""
			if system == "hashicorp-raft" && med["edictlog"].Writes > 0 {
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
