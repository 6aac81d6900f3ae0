package sim

// The runtime's suspend check (replog.Driver.Now asks the clock whether the
// host was suspended since the lease was measured) rests on the clock
// telling the truth about suspends. TestMutations (mutate_test.go, -tags
// edictmutate) switches that off — the process's clock then never reports
// one, as a runtime that did not ask — like the log's and elect's rules;
// simMutation is empty in every other run. The incarnation bump, the
// other rule a runtime keeps, is replog.Recover's (log's incarnation-bump).
const (
	// SimRuleSuspendCheck: the runtime learns of host suspends and gives
	// up a lease one may have outlived.
	SimRuleSuspendCheck = "sim/suspend-check"
)

var simMutationRules = []string{SimRuleSuspendCheck}

// simMutation is the sim rule switched off, or "". It is written only
// between runs, never while one is going.
var simMutation string

func simMutated(rule string) bool { return simMutation != "" && simMutation == rule }

// ignoreSuspend: the runtime is not told of suspends (a negative control,
// or the sim mutation).
func (r *lrun) ignoreSuspend() bool { return r.sc.IgnoreSuspend || simMutated(SimRuleSuspendCheck) }
