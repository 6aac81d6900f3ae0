package check

import (
	"slices"

	"github.com/edictlog/edictlog/jepsen/history"
)

// SetResult is Set's verdict. Value lists are sorted.
type SetResult struct {
	Valid Validity `json:"valid"`
	// Error says why the history could not be read (then Valid is
	// Unknown).
	Error string `json:"error,omitempty"`
	// Attempted counts the adds invoked; Acknowledged, those that
	// completed OK; Failed and Indeterminate, those that failed or whose
	// outcome is unknown.
	Attempted     int `json:"attempted"`
	Acknowledged  int `json:"acknowledged"`
	Failed        int `json:"failed"`
	Indeterminate int `json:"indeterminate"`
	// FinalReads counts the acknowledged final reads; Nodes are the nodes
	// they read.
	FinalReads int   `json:"final_reads"`
	Nodes      []int `json:"nodes"`
	// Lost are the acknowledged adds missing from some final read;
	// LostByNode says from which node's.
	Lost       []int64         `json:"lost"`
	LostByNode map[int][]int64 `json:"lost_by_node,omitempty"`
	// Unexpected are values in a final read that no add attempted.
	Unexpected []int64 `json:"unexpected"`
	// Duplicated are values that appear more than once in one final read;
	// DuplicatedByNode says in which node's.
	Duplicated       []int64         `json:"duplicated"`
	DuplicatedByNode map[int][]int64 `json:"duplicated_by_node,omitempty"`
	// FailedButPresent are failed adds found in a final read.
	FailedButPresent []int64 `json:"failed_but_present"`
	// Recovered are adds with an unknown outcome found in a final read;
	// NeverRead, those found in none. Neither is an anomaly.
	Recovered []int64 `json:"recovered"`
	NeverRead []int64 `json:"never_read"`
}

// Set checks a set workload: adds (FAdd of Value), then final reads
// (FFinalRead, with the Values one Node holds). Every acknowledged add must
// be in every final read, no final read may hold a value never attempted,
// or hold one twice, and no failed add may be in any. Adds with an unknown
// outcome may or may not be present. With no acknowledged final read the
// verdict is Unknown.
func Set(ops []history.Op) SetResult {
	res := SetResult{
		Nodes: []int{}, Lost: []int64{}, Unexpected: []int64{}, Duplicated: []int64{},
		FailedButPresent: []int64{}, Recovered: []int64{}, NeverRead: []int64{},
	}
	paired, err := pair(ops)
	if err != nil {
		res.Valid, res.Error = Unknown, err.Error()
		return res
	}
	outcome := map[int64]history.Type{} // attempted value → outcome of its add
	type read struct {
		node   int
		values []int64
	}
	var reads []read
	for _, o := range paired {
		switch {
		case o.f() == history.FAdd && o.invoke.Value != nil:
			res.Attempted++
			v := *o.invoke.Value
			outcome[v] = o.outcome
			switch o.outcome {
			case history.OK:
				res.Acknowledged++
			case history.Fail:
				res.Failed++
			default:
				res.Indeterminate++
			}
		case o.f() == history.FFinalRead && o.outcome == history.OK:
			reads = append(reads, read{o.complete.Node, o.complete.Values})
			if o.complete.Node == 0 {
				reads[len(reads)-1].node = o.invoke.Node
			}
		}
	}
	res.FinalReads = len(reads)

	present := map[int64]bool{} // in some final read
	lost, unexpected, duplicated, failed := set{}, set{}, set{}, set{}
	for _, r := range reads {
		if !slices.Contains(res.Nodes, r.node) {
			res.Nodes = append(res.Nodes, r.node)
		}
		seen := map[int64]int{}
		for _, v := range r.values {
			seen[v]++
			present[v] = true
		}
		for v, n := range seen {
			out, attempted := outcome[v]
			switch {
			case !attempted:
				unexpected.add(v)
			case out == history.Fail:
				failed.add(v)
			}
			if n > 1 {
				duplicated.add(v)
				res.DuplicatedByNode = addTo(res.DuplicatedByNode, r.node, v)
			}
		}
		for v, out := range outcome {
			if out == history.OK && seen[v] == 0 {
				lost.add(v)
				res.LostByNode = addTo(res.LostByNode, r.node, v)
			}
		}
	}
	recovered, never := set{}, set{}
	for v, out := range outcome {
		if out == history.Info {
			if present[v] {
				recovered.add(v)
			} else {
				never.add(v)
			}
		}
	}
	slices.Sort(res.Nodes)
	res.Lost, res.Unexpected, res.Duplicated = lost.sorted(), unexpected.sorted(), duplicated.sorted()
	res.FailedButPresent, res.Recovered, res.NeverRead = failed.sorted(), recovered.sorted(), never.sorted()
	for _, m := range []map[int][]int64{res.LostByNode, res.DuplicatedByNode} {
		for _, vs := range m {
			slices.Sort(vs)
		}
	}

	switch {
	case len(res.Lost)+len(res.Unexpected)+len(res.Duplicated)+len(res.FailedButPresent) > 0:
		res.Valid = Invalid
	case len(reads) == 0:
		res.Valid = Unknown
	default:
		res.Valid = Valid
	}
	return res
}

type set map[int64]bool

func (s set) add(v int64) { s[v] = true }

func (s set) sorted() []int64 {
	out := make([]int64, 0, len(s))
	for v := range s {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func addTo(m map[int][]int64, node int, v int64) map[int][]int64 {
	if m == nil {
		m = map[int][]int64{}
	}
	if !slices.Contains(m[node], v) {
		m[node] = append(m[node], v)
	}
	return m
}
