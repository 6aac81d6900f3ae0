// Command floor measures what bounds one client's write on this machine:
// the time a durable write of a few kilobytes takes (pwrite and
// fdatasync, and a one-entry commit of edictlog's WAL and bbolt stores, alone and
// with as many others at once as a cluster on one disk runs) and a
// loopback TCP round trip. A replicated write waits for at least one
// fdatasync off the leader and one round trip to reach it, whatever the
// software: their sum is the floor docs/benchmarks.md measures put1 and
// logcmp's one writer against. It ends with the host's busy share over the
// run (/proc/stat): figures taken on a busy machine say so.
//
//	cd bench && go run ./cmd/floor [-dir /tmp] [-n 2000]
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
	"github.com/edictlog/edictlog/wire"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "folder on the disk to measure")
	n := flag.Int("n", 2000, "samples per measurement")
	flag.Parse()
	tmp, err := os.MkdirTemp(*dir, "floor-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	busy0, total0 := hostTicks()

	sync1 := fdatasync(tmp, *n)
	fmt.Printf("%-44s %s\n", "pwrite 4 KiB + fdatasync:", summary(sync1))
	commits := map[int][]time.Duration{}
	for _, k := range []int{1, 3} {
		commits[k] = storeCommits(tmp, "wal", k, *n)
		fmt.Printf("%-44s %s\n", fmt.Sprintf("WAL store, 1-entry commit, %d at once:", k), summary(commits[k]))
		bolt := storeCommits(tmp, "bolt", k, *n)
		fmt.Printf("%-44s %s\n", fmt.Sprintf("bbolt store, 1-entry commit, %d at once:", k), summary(bolt))
	}
	rtt := roundTrips(*n * 10)
	fmt.Printf("%-44s %s\n", "loopback TCP round trip, 64 bytes:", summary(rtt))
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	fmt.Printf("floor of one client's write (fdatasync p50 + round trip p50): %v\n", r(p(sync1, 50)+p(rtt, 50)))
	// three members on this one disk sync at once: the leader's and a
	// follower's commit each wait behind the others'
	fmt.Printf("floor with 3 members on this disk (3-at-once commit p50 + round trip p50): %v\n", r(p(commits[3], 50)+p(rtt, 50)))
	if busy1, total1 := hostTicks(); total1 > total0 {
		fmt.Printf("host busy %.0f%% of %d CPUs over the run (this program's own share included)\n",
			100*float64(busy1-busy0)/float64(total1-total0), runtime.NumCPU())
	}
}

// hostTicks reads the host's busy and total CPU time from /proc/stat's
// first line (busy: all but idle and iowait), in clock ticks; 0, 0 where it
// cannot be read.
func hostTicks() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	var idle uint64
	for i, v := range f[1:] {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		total += x
		if i == 3 || i == 4 { // idle, iowait
			idle += x
		}
	}
	return total - idle, total
}

// fdatasync overwrites 4 KiB blocks of a preallocated, synced file, as a
// log store with preallocated pages does, and syncs after each.
func fdatasync(dir string, n int) []time.Duration {
	f, err := os.Create(filepath.Join(dir, "sync"))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	const blocks = 4096
	if err := f.Truncate(blocks * 4096); err != nil {
		fail(err)
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < blocks*4096; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero, off); err != nil {
			fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		fail(err)
	}
	buf := make([]byte, 4096)
	ds := make([]time.Duration, 0, n)
	for i := range n {
		buf[0] = byte(i)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i%blocks)*4096); err != nil {
			fail(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			fail(err)
		}
		ds = append(ds, time.Since(t))
	}
	return ds
}

// storeCommits has k stores of the kind ("wal" or "bolt") commit one
// 256-byte entry at a time, at once.
func storeCommits(dir, kind string, k, n int) []time.Duration {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	for s := range k {
		var st interface {
			StoreBatch(wire.Batch) error
			Close() error
		}
		var err error
		if kind == "wal" {
			st, err = storage.OpenWAL(filepath.Join(dir, fmt.Sprintf("wal-%d-%d", k, s)), nil)
		} else {
			st, err = storage.OpenBolt(filepath.Join(dir, fmt.Sprintf("bolt-%d-%d.db", k, s)), nil)
		}
		if err != nil {
			fail(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			es := storagetest.Entries(1, 1, storagetest.Stamp(1, 1), 256)
			ds := make([]time.Duration, 0, n)
			for i := range n {
				es[0].Index = uint64(i + 1)
				t := time.Now()
				if err := st.StoreBatch(wire.Batch{Entries: es}); err != nil {
					fail(err)
				}
				ds = append(ds, time.Since(t))
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

// roundTrips sends 64 bytes over loopback TCP and waits for their echo.
func roundTrips(n int) []time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 64)
		for {
			k, err := c.Read(b)
			if err != nil {
				return
			}
			if _, err := c.Write(b[:k]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fail(err)
	}
	defer c.Close()
	b := make([]byte, 64)
	ds := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if _, err := c.Write(b); err != nil {
			fail(err)
		}
		for got := 0; got < len(b); {
			k, err := c.Read(b[got:])
			if err != nil {
				fail(err)
			}
			got += k
		}
		ds = append(ds, time.Since(t))
	}
	return ds
}

func p(ds []time.Duration, pct int) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)*pct/100]
}

func summary(ds []time.Duration) string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("p50 %8v  p90 %8v  p99 %8v", r(p(ds, 50)), r(p(ds, 90)), r(p(ds, 99)))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "floor:", err)
	os.Exit(1)
}
