package storagecmp

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkAppend runs each contender under go test -bench; the command in
// cmd/storagecmp alternates them and prints the ratio.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []Contender{EdictlogWAL, Edictlog, RaftBoltDB, RaftBoltDBNoFreelistSync} {
		for _, batch := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", c.Name, batch), func(b *testing.B) {
				a, err := c.Open(filepath.Join(b.TempDir(), "bench.db"), batch, 256)
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				next := uint64(1)
				for b.Loop() {
					if err := a.Append(next); err != nil {
						b.Fatal(err)
					}
					next += uint64(batch)
				}
				b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

func TestRunAndReport(t *testing.T) {
	res, err := Run(Config{
		Dir: t.TempDir(), Batches: []int{2}, EntrySize: 16, Rounds: 2, RoundTime: 5 * time.Millisecond,
		Contenders: []Contender{Edictlog, RaftBoltDB},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Entries == 0 || res[1].Entries == 0 {
		t.Fatalf("results %+v", res)
	}
	var out bytes.Buffer
	Report(&out, res)
	if !strings.Contains(out.String(), "raft-boltdb") || !strings.Contains(out.String(), "x") {
		t.Fatalf("report:\n%s", out.String())
	}
}
