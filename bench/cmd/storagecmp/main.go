// Command storagecmp appends the same batches to edictlog's stores (the
// WALStore, with -wal, and the BoltStore) and to raft-boltdb in one run and
// prints entries/s and their ratio to the first.
//
//	cd bench && go run ./cmd/storagecmp
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/edictlog/edictlog/bench/storagecmp"
)

func main() {
	dir := flag.String("dir", "", "folder for the database files (default: a new temporary folder)")
	batches := flag.String("batches", "1,16,256", "batch sizes")
	size := flag.Int("size", 256, "payload bytes per entry")
	rounds := flag.Int("rounds", 25, "rounds per batch size (contenders alternate)")
	roundTime := flag.Duration("round", 250*time.Millisecond, "time per contender per round")
	tuned := flag.Bool("tuned", true, "also run raft-boltdb with NoFreelistSync")
	wal := flag.Bool("wal", false, "run edictlog's WALStore first, so that the ratios are its own")
	flag.Parse()
	bs, err := storagecmp.ParseBatches(*batches)
	if err != nil {
		fail(err)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "storagecmp-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	cs := []storagecmp.Contender{storagecmp.Edictlog, storagecmp.RaftBoltDB}
	if *wal {
		cs = append([]storagecmp.Contender{storagecmp.EdictlogWAL}, cs...)
	}
	if *tuned {
		cs = append(cs, storagecmp.RaftBoltDBNoFreelistSync)
	}
	fmt.Printf("appending %d-byte entries, fsync on, %d rounds of %v per store and batch size, %d CPUs, files in %s\n",
		*size, *rounds, *roundTime, runtime.NumCPU(), *dir)
	res, err := storagecmp.Run(storagecmp.Config{Dir: *dir, Batches: bs, EntrySize: *size, Rounds: *rounds, RoundTime: *roundTime, Contenders: cs})
	if err != nil {
		fail(err)
	}
	storagecmp.Report(os.Stdout, res)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "storagecmp:", err)
	os.Exit(1)
}
