// Package report turns a Jepsen-style test's history (package
// jepsen/history) into pictures and numbers a person can read after a run:
//
//   - Latency: a scatter plot of every completed client operation's latency
//     against the time it was invoked, coloured by outcome (ok, fail, info)
//     and shaped by function (read, write, cas, add, ...).
//   - Throughput: completions per second over time, one line per outcome.
//   - Summary: counts by function and outcome and latency percentiles of
//     the OK operations, ready to be marshalled into a results.json.
//
// Both plots shade the nemesis's faults (history.Intervals) as translucent
// vertical bands, labelled with the fault's name and listed in the legend,
// so that a latency spike or a drop in throughput can be matched to the
// fault that caused it, and the spans in which no node led
// (history.Leaderless, from the harness's monitor) in red. The output format follows the path's extension:
// ".png" or ".svg".
//
// An operation is paired with the next completion (ok, fail or info) of the
// same client process; an operation that was invoked but never completed
// has no latency, is left out of the plots, and is counted as incomplete by
// Summary. Empty histories, and histories without faults, give valid empty
// plots and zero statistics rather than errors.
package report

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edictlog/edictlog/jepsen/history"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// completion is one client operation from its invocation to its completion.
type completion struct {
	F          string
	Outcome    history.Type // history.OK, Fail or Info
	Start, End int64        // ns since the test began
}

// latencyMS is the operation's latency in milliseconds.
func (c completion) latencyMS() float64 { return float64(c.End-c.Start) / 1e6 }

// pair matches each client invocation with the next completion of the same
// process. It returns the completed operations in order of completion, the
// invocations that never completed, and the history's last timestamp.
func pair(ops []history.Op) (done []completion, pending []history.Op, end int64) {
	open := map[int]history.Op{} // process → its operation in flight
	for _, op := range ops {
		end = max(end, op.Time)
		if !op.Client() {
			continue
		}
		switch op.Type {
		case history.Invoke:
			open[op.Process] = op
		case history.OK, history.Fail, history.Info:
			inv, ok := open[op.Process]
			if !ok {
				continue // a completion without an invocation: nothing to pair
			}
			delete(open, op.Process)
			done = append(done, completion{F: inv.F, Outcome: op.Type, Start: inv.Time, End: op.Time})
		}
	}
	for _, inv := range open {
		pending = append(pending, inv)
	}
	slices.SortFunc(pending, func(a, b history.Op) int { return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Index, b.Index)) })
	return done, pending, end
}

// outcomes are the completion types, in the order they are drawn.
var outcomes = []history.Type{history.OK, history.Fail, history.Info}

// Plot size.
const (
	width  = 10 * vg.Inch
	height = 5 * vg.Inch
)

// checkFormat reports whether path names a supported output format.
func checkFormat(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	}
	return fmt.Errorf("report: %s: unsupported format (want .png or .svg)", path)
}

// save writes p to path.
func save(p *plot.Plot, path string) error {
	if err := p.Save(width, height, path); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return nil
}

// inf is +∞, the start of a running minimum.
var inf = math.Inf(1)

// seconds converts ns since the test began to seconds.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }
