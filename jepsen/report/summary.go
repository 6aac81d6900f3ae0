package report

import (
	"math"
	"slices"

	"github.com/edictlog/edictlog/jepsen/history"
)

// Stats summarises a history's client operations and faults.
type Stats struct {
	// Total counts all client operations by outcome.
	Total Outcomes `json:"total"`
	// ByF counts the client operations of each function by outcome.
	ByF map[string]Outcomes `json:"by_f"`
	// Latency is the latency of each function's OK operations.
	Latency map[string]Percentiles `json:"latency"`
	// Faults counts the nemesis's faults by name.
	Faults map[string]int `json:"faults"`
}

// Outcomes counts operations by how they ended.
type Outcomes struct {
	Invoked    int `json:"invoked"`
	OK         int `json:"ok"`
	Fail       int `json:"fail"`
	Info       int `json:"info"`
	Incomplete int `json:"incomplete"` // invoked but never completed
}

// Percentiles describe a latency distribution in milliseconds, by the
// nearest-rank method: P90 is the smallest latency at least 90% of the
// operations did not exceed.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary counts ops' client operations by function and outcome, computes
// the latency percentiles of the OK ones, and counts the faults. Its maps
// are never nil, so an empty history marshals as empty objects.
func Summary(ops []history.Op) Stats {
	done, pending, _ := pair(ops)
	s := Stats{
		ByF:     map[string]Outcomes{},
		Latency: map[string]Percentiles{},
		Faults:  map[string]int{},
	}
	add := func(f string, inc func(*Outcomes)) {
		o := s.ByF[f]
		o.Invoked++
		inc(&o)
		s.ByF[f] = o
		s.Total.Invoked++
		inc(&s.Total)
	}
	lat := map[string][]float64{}
	for _, c := range done {
		switch c.Outcome {
		case history.OK:
			add(c.F, func(o *Outcomes) { o.OK++ })
			lat[c.F] = append(lat[c.F], c.latencyMS())
		case history.Fail:
			add(c.F, func(o *Outcomes) { o.Fail++ })
		case history.Info:
			add(c.F, func(o *Outcomes) { o.Info++ })
		}
	}
	for _, inv := range pending {
		add(inv.F, func(o *Outcomes) { o.Incomplete++ })
	}
	for f, ls := range lat {
		s.Latency[f] = percentiles(ls)
	}
	for _, in := range history.Intervals(ops) {
		s.Faults[in.Nemesis]++
	}
	return s
}

// percentiles sorts ls (not empty) and reads its percentiles.
func percentiles(ls []float64) Percentiles {
	slices.Sort(ls)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ls))/100)) - 1
		return ls[max(i, 0)]
	}
	return Percentiles{Count: len(ls), P50: rank(50), P90: rank(90), P99: rank(99), Max: ls[len(ls)-1]}
}
