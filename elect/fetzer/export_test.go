package fetzer

// The broken modes, for the checkers' negative controls in broken_test.go
// (the checkers live in internal/sim/fetzersim). Each is a tweak for
// fetzersim.NewWorld.

// BreakAlone makes e a leader on its own support (breaks BI).
func BreakAlone(e *Elector) { e.broken.alone = true }

// BreakMute makes e never send an Election (breaks T).
func BreakMute(e *Elector) { e.broken.mute = true }

// BreakLiteral makes e keep a leadership whose renewal failed, as Fig. 31
// reads (breaks SO).
func BreakLiteral(e *Elector) { e.broken.literal = true }
