package sim

// The simulator's driver carries out two rules that log.Node also keeps
// and that safety rests on: the incarnation is bumped before a restarted
// process sends anything, and a leader gives its lease up after a host
// suspend. TestMutations (mutate_test.go, -tags edictmutate) switches them
// off one at a time, like the log's and elect's rules; simMutation is
// empty in every other run.
const (
	// SimRuleIncarnation: start bumps the incarnation on every restart.
	SimRuleIncarnation = "sim/incarnation-bump"
	// SimRuleSuspendCheck: the driver releases a lease a suspend may have
	// outlived and serves no lease read across a suspend (checkSuspend,
	// serveReads).
	SimRuleSuspendCheck = "sim/suspend-check"
)

var simMutationRules = []string{SimRuleIncarnation, SimRuleSuspendCheck}

// simMutation is the sim rule switched off, or "". It is written only
// between runs, never while one is going.
var simMutation string

func simMutated(rule string) bool { return simMutation != "" && simMutation == rule }
