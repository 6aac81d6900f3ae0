package check

// Validity is a checker's verdict: Valid, Invalid or Unknown.
type Validity string

// The verdicts.
const (
	Valid   Validity = "true"    // the history shows no anomaly
	Invalid Validity = "false"   // the history shows an anomaly
	Unknown Validity = "unknown" // the check could not decide (timed out, or nothing to judge)
)

// OK reports whether v is Valid; Unknown is not OK.
func (v Validity) OK() bool { return v == Valid }

// worst combines verdicts: Invalid beats Unknown beats Valid.
func worst(a, b Validity) Validity {
	switch {
	case a == Invalid || b == Invalid:
		return Invalid
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return Valid
}

// Counts is how many client operations there were, by function (F) and
// then by outcome ("ok", "fail", "info"; an operation the test ended before
// completing counts as "info").
type Counts map[string]map[string]int

func countOps(ops []operation) Counts {
	c := Counts{}
	for _, op := range ops {
		if c[op.f()] == nil {
			c[op.f()] = map[string]int{}
		}
		c[op.f()][string(op.outcome)]++
	}
	return c
}
