package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edictlog/edictlog/jepsen/history"
)

// RegisterOptions tunes Register.
type RegisterOptions struct {
	// Timeout bounds the whole check (all keys together); 0 means no
	// limit. Keys not decided in time are Unknown, and so is the result
	// unless some key is Invalid.
	Timeout time.Duration
	// Levels are the read levels checked for linearizability; reads at
	// other levels are left out of the check (and counted in
	// RegisterResult.SkippedReads). Empty means every read, whatever its
	// level. Final reads are reads too.
	Levels []string
	// VisualizationPath, if set, is where porcupine's HTML visualization of
	// the whole history is written, with the nemesis's faults as
	// annotations on a row of their own. It costs a second check, bounded
	// by Timeout again.
	VisualizationPath string
}

// RegisterResult is Register's verdict.
type RegisterResult struct {
	Valid Validity `json:"valid"`
	// Keys is how many keys had operations to check; Checked is how many
	// operations were given to the linearizability checker.
	Keys    int `json:"keys"`
	Checked int `json:"checked"`
	// Counts counts every client operation of the history.
	Counts Counts `json:"counts"`
	// Levels are the read levels checked (empty: all).
	Levels []string `json:"levels,omitempty"`
	// SkippedReads counts the acknowledged reads left out because of their
	// level, by level.
	SkippedReads map[string]int `json:"skipped_reads,omitempty"`
	// Failures are the keys that are not linearizable or were not decided
	// in time, in key order.
	Failures []KeyResult `json:"failures,omitempty"`
	// Anomaly describes every non-linearizable key, one paragraph each.
	Anomaly string `json:"anomaly,omitempty"`
	// Visualization is the path the visualization was written to.
	Visualization string `json:"visualization,omitempty"`
}

// KeyResult is the verdict on one key that failed or timed out.
type KeyResult struct {
	Key   string   `json:"key"`
	Valid Validity `json:"valid"`
	// Operations is how many operations on the key were checked.
	Operations int `json:"operations"`
	// Linearized is how many of them the longest linearizable prefix
	// found holds (Invalid only).
	Linearized int `json:"linearized,omitempty"`
	// Prefix is the end of that prefix, each step with the state after
	// it; Stuck are the operations one of which had to come next, none of
	// which could (Invalid only).
	Prefix  []string `json:"prefix,omitempty"`
	Stuck   []string `json:"stuck,omitempty"`
	Anomaly string   `json:"anomaly,omitempty"`
}

// Register checks that the register operations of ops (read, write, cas,
// and final reads of a Key) are linearizable, each key being an
// independent register that starts missing. Acknowledged operations must
// take effect between invocation and completion; failed ones are left out;
// writes and cas with an unknown outcome may take effect at any time after
// their invocation, or never; reads with an unknown outcome constrain
// nothing and are left out. It fails only on a malformed history (or when
// the visualization cannot be written, in which case the result is still
// returned).
func Register(ops []history.Op, opts RegisterOptions) (RegisterResult, error) {
	paired, err := pair(ops)
	if err != nil {
		return RegisterResult{}, err
	}
	res := RegisterResult{Counts: countOps(paired), Levels: opts.Levels}
	byKey, skipped := registerOperations(ops, paired, opts.Levels)
	if len(skipped) > 0 {
		res.SkippedReads = skipped
	}
	keys := make([]string, 0, len(byKey))
	for k, kops := range byKey {
		keys = append(keys, k)
		res.Checked += len(kops)
	}
	slices.Sort(keys)
	res.Keys = len(keys)

	res.Valid = Valid
	if len(keys) == 0 {
		res.Valid = Unknown // nothing to judge
	}
	deadline := time.Now().Add(opts.Timeout)
	var anomalies []string
	for _, k := range keys {
		kr := checkKey(k, byKey[k], opts.Timeout > 0, deadline)
		res.Valid = worst(res.Valid, kr.Valid)
		if kr.Valid != Valid {
			res.Failures = append(res.Failures, kr)
		}
		if kr.Anomaly != "" {
			anomalies = append(anomalies, kr.Anomaly)
		}
	}
	res.Anomaly = strings.Join(anomalies, "\n\n")

	if opts.VisualizationPath != "" {
		if err := visualize(ops, byKey, keys, opts); err != nil {
			return res, err
		}
		res.Visualization = opts.VisualizationPath
	}
	return res, nil
}

// registerOperations turns the register operations into porcupine's, by
// key, and counts the reads skipped for their level.
func registerOperations(ops []history.Op, paired []operation, levels []string) (map[string][]porcupine.Operation, map[string]int) {
	var last int64
	for _, op := range ops {
		last = max(last, op.Time)
	}
	infinity := last + 1 // after every event: an unknown outcome's return
	byKey := map[string][]porcupine.Operation{}
	skipped := map[string]int{}
	for _, o := range paired {
		inv := o.invoke
		if o.outcome == history.Fail {
			continue // it did not happen
		}
		in := regInput{key: inv.Key, f: inv.F}
		var out regOutput
		switch inv.F {
		case history.FRead, history.FFinalRead:
			if inv.F == history.FFinalRead && inv.Key == "" {
				continue // a set's final read
			}
			if o.outcome != history.OK {
				continue // an unknown read constrains nothing
			}
			if len(levels) > 0 && !slices.Contains(levels, inv.Level) {
				skipped[inv.Level]++
				continue
			}
			out.read = stateOf(o.complete.Value)
		case history.FWrite:
			in.value = stateOf(inv.Value)
		case history.FCAS:
			in.value, in.prev = stateOf(inv.Value), stateOf(inv.Prev)
		default:
			continue
		}
		ret := infinity
		if o.outcome == history.OK {
			ret = o.end
		} else {
			out.unknown = true
		}
		byKey[inv.Key] = append(byKey[inv.Key], porcupine.Operation{
			ClientId: inv.Process,
			Input:    in,
			Call:     inv.Time,
			Output:   out,
			Return:   ret,
			Metadata: opMeta{process: inv.Process, node: inv.Node, level: inv.Level, invoke: inv.Index, outcome: o.outcome},
		})
	}
	return byKey, skipped
}

// checkKey checks one key's operations, by deadline if limited.
func checkKey(key string, ops []porcupine.Operation, limited bool, deadline time.Time) KeyResult {
	kr := KeyResult{Key: key, Operations: len(ops), Valid: Unknown}
	budget := func() (time.Duration, bool) {
		if !limited {
			return 0, true
		}
		d := time.Until(deadline)
		return d, d > 0
	}
	d, ok := budget()
	if !ok {
		return kr
	}
	model := registerModel(false)
	switch porcupine.CheckOperationsTimeout(model, ops, d) {
	case porcupine.Ok:
		kr.Valid = Valid
		return kr
	case porcupine.Unknown:
		return kr
	}
	kr.Valid = Invalid
	// Check again, keeping the partial linearizations, to say where.
	if d, ok = budget(); !ok {
		kr.Anomaly = fmt.Sprintf("key %q is not linearizable (no time was left to find where).", key)
		return kr
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, d)
	describeViolation(&kr, ops, info)
	return kr
}
