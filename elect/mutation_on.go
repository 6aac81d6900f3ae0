//go:build edictmutate

package elect

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Built only with -tags edictmutate, for the mutation runner
// (internal/sim's TestMutations): one rule at a time is switched off, and
// the simulator must find the violation that follows. The switch is this
// one, for elect's rules and for those the log registers.

var (
	mutation   atomic.Pointer[string]
	registerMu sync.Mutex
	known      = slices.Clone(mutationRules)
)

// RegisterMutationRules adds rules of a package built on this one (the
// log's) to those Mutate accepts.
func RegisterMutationRules(rules ...string) {
	registerMu.Lock()
	defer registerMu.Unlock()
	known = append(known, rules...)
}

// EDICT_MUTATE names a rule to switch off from the start, so that any
// test can be run against one mutation:
//
//	EDICT_MUTATE=reply-reign go test -tags edictmutate ./internal/replog/ -run TestInteraction/stale_append_reply
//
// It is read on the first call to Mutated, once every package has
// registered its rules.
var fromEnv sync.Once

// Mutate switches rule's check off ("" switches every check back on). It
// panics on a rule no package registered.
func Mutate(rule string) {
	registerMu.Lock()
	ok := rule == "" || slices.Contains(known, rule)
	registerMu.Unlock()
	if !ok {
		panic(fmt.Sprintf("elect: no rule %q to mutate", rule))
	}
	fromEnv.Do(func() {})
	mutation.Store(&rule)
}

// MutationRules lists elect's own rules, in docs/protocol.md's order.
func MutationRules() []string { return slices.Clone(mutationRules) }

// Mutated reports whether rule's check is switched off.
func Mutated(rule string) bool {
	fromEnv.Do(func() {
		if rule := os.Getenv("EDICT_MUTATE"); rule != "" {
			registerMu.Lock()
			ok := slices.Contains(known, rule)
			registerMu.Unlock()
			if ok {
				mutation.Store(&rule)
			}
		}
	})
	m := mutation.Load()
	return m != nil && *m == rule
}

func mutated(rule string) bool { return Mutated(rule) }
