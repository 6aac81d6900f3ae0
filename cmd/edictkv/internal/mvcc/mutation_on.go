//go:build edictmutate

package mvcc

import "github.com/edictlog/edictlog/elect"

// Built only with -tags edictmutate: the store's rules go through
// elect's switch, as the log's do, so that EDICT_MUTATE=<rule> names it
// for any test run.

func init() {
	elect.RegisterMutationRules(RuleCompactKeepsNewest, RuleWatchCatchUpWhole, RuleWatchRestoreUnsynced)
}

// Mutate switches rule's check off ("" switches every check back on).
func Mutate(rule string) { elect.Mutate(rule) }

func mutated(rule string) bool { return elect.Mutated(rule) }
