package sim

// Claim is one row of docs/detectors.md: what a paper claims about its
// algorithm beside what the simulator measured, for one cluster size.
type Claim struct {
	// Algorithm is the Protocol's name (as edictkv --detector will take
	// it), Property the claim's name in the paper's words (e.g. "SLE1",
	// "messages after a leader crash", "election time").
	Algorithm, Property string
	N                   int
	// Paper is what the paper claims (a bound or a formula evaluated for
	// N, with its section or figure); Measured is what this run saw.
	Paper, Measured string
	// Holds says whether the measurement agrees with the claim.
	Holds bool
}
