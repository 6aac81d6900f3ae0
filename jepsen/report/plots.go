package report

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// outcomeColors colour the completion types.
var outcomeColors = map[history.Type]color.Color{
	history.OK:   color.NRGBA{R: 0x1b, G: 0x9e, B: 0x3a, A: 0xff}, // green
	history.Fail: color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	history.Info: color.NRGBA{R: 0xff, G: 0x8c, B: 0x00, A: 0xff}, // orange
}

// shapes are the markers of the functions; other functions get a ring.
var shapes = map[string]draw.GlyphDrawer{
	history.FRead:      draw.CircleGlyph{},
	history.FWrite:     draw.TriangleGlyph{},
	history.FCAS:       draw.SquareGlyph{},
	history.FAdd:       draw.CrossGlyph{},
	history.FFinalRead: draw.PlusGlyph{},
}

// glyph is the marker of function f.
func glyph(f string, c color.Color) draw.GlyphStyle {
	g := draw.GlyphStyle{Color: c, Radius: vg.Points(2), Shape: shapes[f]}
	if g.Shape == nil {
		g.Shape = draw.RingGlyph{}
	}
	return g
}

// glyphThumb is a legend thumbnail showing one marker.
type glyphThumb draw.GlyphStyle

// Thumbnail implements plot.Thumbnailer.
func (g glyphThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle(g), c.Center())
}

// minLatencyMS is where latencies are clamped on a log axis (1 µs).
const minLatencyMS = 1e-3

// Latency writes to path (.png or .svg) a scatter plot of each completed
// client operation's latency in milliseconds against the time of its
// invocation in seconds since the test began, over the nemesis's faults.
// The colour of a point is its outcome and its shape its function; the
// legend lists both. Spans in which no node led (history.Leaderless) are
// shaded red, with a solid strip along the bottom. The latency axis is logarithmic when the latencies
// span more than an order of magnitude; latencies are clamped at 1 µs.
func Latency(ops []history.Op, path string) error {
	if err := checkFormat(path); err != nil {
		return err
	}
	done, pending, end := pair(ops)
	p := newPlot("Latency", "time since start (s)", "latency (ms)", len(done), len(pending))
	b := newBands(history.Intervals(ops))
	gaps := gapBands{history.Leaderless(ops)}
	p.Add(b, gaps)

	type key struct {
		f       string
		outcome history.Type
	}
	series := map[key]plotter.XYs{}
	var keys []key // in order of first appearance
	lo, hi := inf, 0.0
	for _, c := range done {
		k := key{c.F, c.Outcome}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		l := max(c.latencyMS(), minLatencyMS)
		lo, hi = min(lo, l), max(hi, l)
		series[k] = append(series[k], plotter.XY{X: seconds(c.Start), Y: l})
	}
	fs := map[string]bool{}
	for _, o := range outcomes { // draw ok first so failures stay visible on top
		for _, k := range keys {
			if k.outcome != o {
				continue
			}
			s, err := plotter.NewScatter(series[k])
			if err != nil {
				return fmt.Errorf("report: latency: %w", err)
			}
			s.GlyphStyle = glyph(k.f, outcomeColors[o])
			p.Add(s)
			fs[k.f] = true
		}
	}
	// The legend explains colours and shapes separately: 3 + 4 entries
	// rather than 12.
	for _, o := range outcomes {
		if slices.ContainsFunc(keys, func(k key) bool { return k.outcome == o }) {
			p.Legend.Add(string(o), swatch{outcomeColors[o]})
		}
	}
	for _, f := range slices.Sorted(maps.Keys(fs)) {
		p.Legend.Add(f, glyphThumb(glyph(f, color.Black)))
	}
	b.legend(p)
	gaps.legend(p)
	fitX(p, end)
	if len(done) > 0 && hi/lo > 10 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	} else {
		fitY(p)
	}
	return save(p, path)
}

// Throughput writes to path (.png or .svg) a plot of client completions
// per second over time, counted in buckets of the given width (1 s if
// bucket is not positive), one line per outcome, over the nemesis's faults
// and the spans in which no node led. The last bucket ends with the history, and its rate is taken over its
// actual width (at least a quarter bucket).
func Throughput(ops []history.Op, path string, bucket time.Duration) error {
	if err := checkFormat(path); err != nil {
		return err
	}
	if bucket <= 0 {
		bucket = time.Second
	}
	done, pending, end := pair(ops)
	n := end/int64(bucket) + 1
	if n > 100_000 {
		return fmt.Errorf("report: throughput: bucket %v is too small for a %v history", bucket, time.Duration(end))
	}
	title := fmt.Sprintf("Throughput (%v buckets)", bucket)
	p := newPlot(title, "time since start (s)", "completions per second", len(done), len(pending))
	b := newBands(history.Intervals(ops))
	gaps := gapBands{history.Leaderless(ops)}
	p.Add(b, gaps)

	counts := map[history.Type][]int{}
	for _, c := range done {
		if counts[c.Outcome] == nil {
			counts[c.Outcome] = make([]int, n)
		}
		counts[c.Outcome][max(c.End, 0)/int64(bucket)]++
	}
	for _, o := range outcomes {
		cs := counts[o]
		if cs == nil {
			continue
		}
		xys := make(plotter.XYs, n)
		for i, k := range cs {
			from, width := int64(i)*int64(bucket), int64(bucket)
			if i == len(cs)-1 { // the last bucket ends with the history
				width = max(end-from, width/4)
			}
			xys[i] = plotter.XY{X: seconds(from + width/2), Y: float64(k) / seconds(width)}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("report: throughput: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: outcomeColors[o], Width: vg.Points(1.5)}
		p.Add(l)
		p.Legend.Add(string(o), l)
	}
	b.legend(p)
	gaps.legend(p)
	fitX(p, end)
	fitY(p)
	return save(p, path)
}

// newPlot makes a plot with the given labels; the title notes how many
// operations it shows and how many never completed.
func newPlot(title, x, y string, done, pending int) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %d completed operations", title, done)
	if pending > 0 {
		p.Title.Text += fmt.Sprintf(", %d never completed", pending)
	}
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	return p
}

// fitX starts the time axis at the test's start and ends it no earlier
// than the history's end, leaving room on the right for the legend.
func fitX(p *plot.Plot, end int64) {
	p.X.Min = 0
	p.X.Max = max(p.X.Max, seconds(end))
	if p.X.Max <= 0 {
		p.X.Max = 1
	}
	p.X.Max *= 1.12
}

// fitY starts a linear y axis at 0 and gives an empty plot a unit range.
func fitY(p *plot.Plot) {
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
}
