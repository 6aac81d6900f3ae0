// Package storagecmp compares edictlog's bbolt log store with
// github.com/hashicorp/raft-boltdb/v2 on the same appends: batches of
// entries with 256-byte payloads, one durable bbolt transaction per batch on
// both sides. raft-boltdb commits as bbolt does, with two fdatasyncs (the
// pages, then the meta page); edictlog writes both and syncs once, and rolls
// back at open a commit that a power loss tore (storage/bolt_rollback.go,
// shown by storage's TestPowerLoss). It lives in its own module so that the
// library's go.mod does not depend on raft-boltdb.
package storagecmp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
	"github.com/edictlog/edictlog/wire"
)

// Appender is one store under test, appending batches of batch entries.
type Appender interface {
	// Append stores the entries from index next on, batch of them, in one
	// durable transaction.
	Append(next uint64) error
	// PageWrites is the number of pages (bbolt's, or 4 KiB blocks of a
	// WALStore's segments) written so far.
	PageWrites() int64
	Close() error
}

// Contender names a store and opens it on a file for a batch size.
type Contender struct {
	Name string
	Open func(path string, batch, size int) (Appender, error)
}

// Edictlog is storage.BoltStore with its default options.
var Edictlog = Contender{Name: "edictlog", Open: openEdictlog}

// EdictlogWAL is storage.WALStore with its default options; path is its
// folder.
var EdictlogWAL = Contender{Name: "edictlog-wal", Open: func(path string, batch, size int) (Appender, error) {
	s, err := storage.OpenWAL(path, nil)
	if err != nil {
		return nil, err
	}
	return &edictlogAppender{s: s, es: storagetest.Entries(1, batch, storagetest.Stamp(1, 1), size)}, nil
}}

// RaftBoltDB is raft-boltdb v2 as hashicorp/raft users get it by default.
var RaftBoltDB = Contender{Name: "raft-boltdb", Open: func(path string, batch, size int) (Appender, error) {
	return openRaftBoltDB(path, batch, size, nil)
}}

// RaftBoltDBNoFreelistSync is raft-boltdb with the bbolt options edictlog
// uses (NoFreelistSync, hashmap freelist), to separate what those options
// give from the rest.
var RaftBoltDBNoFreelistSync = Contender{Name: "raft-boltdb+nofreelistsync", Open: func(path string, batch, size int) (Appender, error) {
	return openRaftBoltDB(path, batch, size, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType, Timeout: time.Second})
}}

type edictlogAppender struct {
	s interface {
		StoreBatch(wire.Batch) error
		Stats() (storage.Stats, error)
		Close() error
	}
	es []wire.Entry
}

func openEdictlog(path string, batch, size int) (Appender, error) {
	s, err := storage.OpenBolt(path, nil)
	if err != nil {
		return nil, err
	}
	return &edictlogAppender{s: s, es: storagetest.Entries(1, batch, storagetest.Stamp(1, 1), size)}, nil
}

func (a *edictlogAppender) Append(next uint64) error {
	for i := range a.es {
		a.es[i].Index = next + uint64(i)
	}
	return a.s.StoreBatch(wire.Batch{Entries: a.es})
}

func (a *edictlogAppender) PageWrites() int64 {
	st, err := a.s.Stats()
	if err != nil {
		return 0
	}
	return int64(st.PageWrites)
}

func (a *edictlogAppender) Close() error { return a.s.Close() }

type raftAppender struct {
	s    *raftboltdb.BoltStore
	logs []*raft.Log
}

func openRaftBoltDB(path string, batch, size int, opts *bolt.Options) (Appender, error) {
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: opts})
	if err != nil {
		return nil, err
	}
	a := &raftAppender{s: s}
	now := time.Now()
	for i := range batch {
		a.logs = append(a.logs, &raft.Log{Term: 1, Type: raft.LogCommand, Data: storagetest.Data(uint64(i+1), size), AppendedAt: now})
	}
	return a, nil
}

func (a *raftAppender) Append(next uint64) error {
	for i, l := range a.logs {
		l.Index = next + uint64(i)
	}
	return a.s.StoreLogs(a.logs)
}

func (a *raftAppender) PageWrites() int64 {
	st := a.s.Stats()
	return st.TxStats.GetWrite()
}

func (a *raftAppender) Close() error { return a.s.Close() }

// Config is one comparison run.
type Config struct {
	Dir        string        // where the files go
	Batches    []int         // batch sizes
	EntrySize  int           // payload bytes per entry
	Rounds     int           // rounds per batch size; contenders alternate
	RoundTime  time.Duration // time per contender per round
	Contenders []Contender
}

// Result is one contender's total at one batch size.
type Result struct {
	Contender string
	Batch     int
	Entries   uint64
	Elapsed   time.Duration
	// RoundRates are the entries/s of each round, to show the spread.
	RoundRates []float64
	// PagesPerCommit is the mean number of pages each commit wrote.
	PagesPerCommit float64
}

// Rate is the entries appended per second.
func (r Result) Rate() float64 { return float64(r.Entries) / r.Elapsed.Seconds() }

// Run appends with every contender for every batch size. Within a batch
// size the contenders take turns for Rounds rounds of RoundTime each, so
// that noise from other work on the machine falls on all of them alike.
func Run(cfg Config) ([]Result, error) {
	var out []Result
	for _, batch := range cfg.Batches {
		apps := make([]Appender, len(cfg.Contenders))
		next := make([]uint64, len(cfg.Contenders))
		res := make([]Result, len(cfg.Contenders))
		for i, c := range cfg.Contenders {
			path := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d.db", c.Name, batch))
			os.RemoveAll(path) // a WALStore is a folder
			a, err := c.Open(path, batch, cfg.EntrySize)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			defer a.Close()
			apps[i], next[i] = a, 1
			res[i] = Result{Contender: c.Name, Batch: batch}
		}
		for range cfg.Rounds {
			for i, a := range apps {
				start, n := time.Now(), uint64(0)
				for time.Since(start) < cfg.RoundTime {
					if err := a.Append(next[i]); err != nil {
						return nil, fmt.Errorf("%s: append at %d: %w", cfg.Contenders[i].Name, next[i], err)
					}
					next[i] += uint64(batch)
					n += uint64(batch)
				}
				d := time.Since(start)
				res[i].Entries += n
				res[i].Elapsed += d
				res[i].RoundRates = append(res[i].RoundRates, float64(n)/d.Seconds())
			}
		}
		for i, a := range apps {
			res[i].PagesPerCommit = float64(a.PageWrites()) / float64((next[i]-1)/uint64(batch))
			if err := a.Close(); err != nil {
				return nil, fmt.Errorf("%s: close: %w", cfg.Contenders[i].Name, err)
			}
		}
		out = append(out, res...)
	}
	return out, nil
}

// Ratio is base's entries/s over r's, over the whole run.
func Ratio(base, r Result) float64 { return base.Rate() / r.Rate() }

// MedianRoundRatio is the median over rounds of base's rate over r's in the
// same round. Rounds alternate between the stores, so each pair ran under
// nearly the same load from the rest of the machine; the median discards
// rounds that a burst of other work hit.
func MedianRoundRatio(base, r Result) float64 {
	n := min(len(base.RoundRates), len(r.RoundRates))
	rs := make([]float64, n)
	for i := range n {
		rs[i] = base.RoundRates[i] / r.RoundRates[i]
	}
	slices.Sort(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}

// Report prints a table of entries/s and, for each batch size, the ratios of
// the first contender to each other one.
func Report(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batch\tstore\tentries/s\tround min\tround max\tpages/commit\tratio\tmedian round ratio\t")
	var base Result
	for _, r := range results {
		if r.Contender == results[0].Contender {
			base = r
		}
		ratio, median := "-", "-"
		if r.Contender != base.Contender {
			ratio = fmt.Sprintf("%.2fx", Ratio(base, r))
			median = fmt.Sprintf("%.2fx", MedianRoundRatio(base, r))
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%s\t%s\t\n", r.Batch, r.Contender, r.Rate(), slices.Min(r.RoundRates), slices.Max(r.RoundRates), r.PagesPerCommit, ratio, median)
	}
	tw.Flush()
	fmt.Fprintf(w, "ratio = %s entries/s ÷ that store's entries/s at the same batch size, over the run\n", results[0].Contender)
}

// ParseBatches parses a comma-separated list of batch sizes.
func ParseBatches(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			return nil, fmt.Errorf("bad batch size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
