//go:build edictmutate

package elect

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// Built only with -tags edictmutate, for the mutation runner
// (internal/sim's TestMutations): one rule at a time is switched off, and
// the simulator must find the violation that follows.

var mutation atomic.Pointer[string]

// Mutate switches rule's check off ("" switches every check back on). It
// panics on a rule this package does not have.
func Mutate(rule string) {
	if rule != "" && !slices.Contains(mutationRules, rule) {
		panic(fmt.Sprintf("elect: no rule %q to mutate", rule))
	}
	mutation.Store(&rule)
}

// MutationRules lists the rules Mutate knows, in docs/protocol.md's order.
func MutationRules() []string { return slices.Clone(mutationRules) }

func mutated(rule string) bool {
	m := mutation.Load()
	return m != nil && *m == rule
}
