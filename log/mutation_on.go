//go:build edictmutate

package log

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
)

// Built only with -tags edictmutate, for the mutation runner
// (internal/sim's TestMutations): one rule at a time is switched off, and
// the simulator must find the violation that follows.

var mutation atomic.Pointer[string]

// EDICT_MUTATE names a rule to switch off from the start, so that any
// test can be run against one mutation:
//
//	EDICT_MUTATE=reply-reign go test -tags edictmutate ./log/ -run TestStale
func init() {
	if rule := os.Getenv("EDICT_MUTATE"); rule != "" && slices.Contains(mutationRules, rule) {
		Mutate(rule)
	}
}

// Mutate switches rule's check off ("" switches every check back on). It
// panics on a rule this package does not have.
func Mutate(rule string) {
	if rule != "" && !slices.Contains(mutationRules, rule) {
		panic(fmt.Sprintf("log: no rule %q to mutate", rule))
	}
	mutation.Store(&rule)
}

// MutationRules lists the rules Mutate knows, in docs/protocol.md's order.
func MutationRules() []string { return slices.Clone(mutationRules) }

func mutated(rule string) bool {
	m := mutation.Load()
	return m != nil && *m == rule
}
