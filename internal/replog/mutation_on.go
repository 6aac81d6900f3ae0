//go:build edictmutate

package replog

import (
	"slices"

	"github.com/edictlog/edictlog/elect"
)

// Built only with -tags edictmutate, for the mutation runner: the log's
// rules go through elect's switch (elect.Mutate), so that one rule at a
// time is off across both packages, and EDICT_MUTATE names one for any
// test run.

func init() { elect.RegisterMutationRules(mutationRules...) }

// Mutate switches rule's check off ("" switches every check back on);
// it is elect.Mutate, for the log's rules as well as the lease protocol's.
func Mutate(rule string) { elect.Mutate(rule) }

// MutationRules lists the log's rules, in docs/protocol.md's order.
func MutationRules() []string { return slices.Clone(mutationRules) }

func mutated(rule string) bool { return elect.Mutated(rule) }
