package report

import (
	"image/color"

	"github.com/edictlog/edictlog/jepsen/history"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// bandColors are the translucent fills of the faults, one per nemesis name
// in order of first appearance.
var bandColors = []color.NRGBA{
	{R: 0x80, G: 0x80, B: 0x80, A: 0x40}, // grey
	{R: 0x44, G: 0x77, B: 0xdd, A: 0x38}, // blue
	{R: 0xaa, G: 0x44, B: 0xcc, A: 0x38}, // purple
	{R: 0xdd, G: 0xaa, B: 0x22, A: 0x40}, // ochre
	{R: 0x22, G: 0xaa, B: 0xaa, A: 0x38}, // teal
	{R: 0xcc, G: 0x66, B: 0x99, A: 0x38}, // pink
}

// bands is a plot.Plotter that shades each fault's span across the whole
// height of the data area and writes the nemesis's name at its top.
type bands struct {
	spans  []history.Interval
	colors map[string]color.Color // by nemesis name
	names  []string               // nemesis names in order of first appearance
}

// newBands colours the intervals by nemesis name.
func newBands(spans []history.Interval) *bands {
	b := &bands{spans: spans, colors: map[string]color.Color{}}
	for _, s := range spans {
		if _, ok := b.colors[s.Nemesis]; !ok {
			b.colors[s.Nemesis] = bandColors[len(b.names)%len(bandColors)]
			b.names = append(b.names, s.Nemesis)
		}
	}
	return b
}

// Plot implements plot.Plotter.
func (b *bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := p.Legend.TextStyle
	sty.Font.Size = vg.Points(8)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	for i, s := range b.spans {
		x0, x1 := trX(seconds(s.Start)), trX(seconds(s.End))
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 < x0 {
			continue
		}
		if x1-x0 < vg.Points(0.5) { // keep an instantaneous fault visible
			x1 = x0 + vg.Points(0.5)
		}
		r := vg.Rectangle{Min: vg.Point{X: x0, Y: c.Min.Y}, Max: vg.Point{X: x1, Y: c.Max.Y}}
		c.SetColor(b.colors[s.Nemesis])
		c.Fill(r.Path())
		// Stagger the labels of neighbouring faults so they overlap less.
		y := c.Max.Y - vg.Length(i%3)*sty.Font.Size*1.2
		c.FillText(sty, vg.Point{X: x0 + vg.Points(2), Y: y}, s.Nemesis)
	}
}

// DataRange implements plot.DataRanger: the bands widen the x axis to the
// faults' spans and leave the y axis to the data.
func (b *bands) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = inf, -inf
	for _, s := range b.spans {
		xmin, xmax = min(xmin, seconds(s.Start)), max(xmax, seconds(s.End))
	}
	return xmin, xmax, inf, -inf
}

// legend adds one entry per nemesis name to p's legend.
func (b *bands) legend(p *plot.Plot) {
	for _, n := range b.names {
		p.Legend.Add(n, swatch{b.colors[n]})
	}
}

// swatch is a legend thumbnail filled with one colour.
type swatch struct{ color color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.color)
	c.Fill(c.Rectangle.Path())
}

// leaderlessColor fills the spans without a leader: red, and darker in a
// strip along the bottom, so that they stay visible over a fault's band.
var (
	leaderlessColor      = color.NRGBA{R: 0xe0, G: 0x20, B: 0x20, A: 0x30}
	leaderlessStripColor = color.NRGBA{R: 0xc0, G: 0x10, B: 0x10, A: 0xc0}
)

// gapBands is a plot.Plotter that shades the spans in which no node led
// (history.Leaderless) across the data area, with a solid strip at its
// bottom and "no leader" written above the strip of a span long enough
// to hold it.
type gapBands struct{ gaps []history.Gap }

// Plot implements plot.Plotter.
func (g gapBands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := p.Legend.TextStyle
	sty.Font.Size = vg.Points(7)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YBottom
	strip := vg.Points(4)
	for _, s := range g.gaps {
		x0, x1 := trX(seconds(s.Start)), trX(seconds(s.End))
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 < x0 {
			continue
		}
		if x1-x0 < vg.Points(0.5) {
			x1 = x0 + vg.Points(0.5)
		}
		r := vg.Rectangle{Min: vg.Point{X: x0, Y: c.Min.Y}, Max: vg.Point{X: x1, Y: c.Max.Y}}
		c.SetColor(leaderlessColor)
		c.Fill(r.Path())
		r.Max.Y = c.Min.Y + strip
		c.SetColor(leaderlessStripColor)
		c.Fill(r.Path())
		if x1-x0 > vg.Points(40) {
			c.FillText(sty, vg.Point{X: x0 + vg.Points(2), Y: c.Min.Y + strip + vg.Points(1)}, "no leader")
		}
	}
}

// DataRange implements plot.DataRanger, as bands does.
func (g gapBands) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = inf, -inf
	for _, s := range g.gaps {
		xmin, xmax = min(xmin, seconds(s.Start)), max(xmax, seconds(s.End))
	}
	return xmin, xmax, inf, -inf
}

// legend adds "no leader" to p's legend if there is a span without one.
func (g gapBands) legend(p *plot.Plot) {
	if len(g.gaps) > 0 {
		p.Legend.Add("no leader", swatch{leaderlessStripColor})
	}
}
