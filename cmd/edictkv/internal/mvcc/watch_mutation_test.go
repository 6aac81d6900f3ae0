//go:build edictmutate

package mvcc

import (
	"fmt"
	"testing"
)

// TestWatchMutation is the watch model's negative control: with each
// watch rule switched off — RuleWatchCatchUpWhole (a catch-up response
// loses its last event), RuleWatchRestoreUnsynced (a snapshot install
// leaves synced watchers synced, so they miss what it brought) — a seed of
// TestWatchModel must fail, and the same seed with the rule in force must
// not.
//
//	go test -tags edictmutate ./cmd/edictkv/internal/mvcc/ -run TestWatchMutation -count=1 -v
func TestWatchMutation(t *testing.T) {
	type caught struct{ msg string }
	run := func(seed uint64) (msg string) {
		defer func() {
			if x := recover(); x != nil {
				c, ok := x.(caught)
				if !ok {
					panic(x)
				}
				msg = c.msg
			}
		}()
		runWatchModel(t, seed, "memory", func(m string) { panic(caught{m}) })
		return ""
	}
	for _, rule := range []string{RuleWatchCatchUpWhole, RuleWatchRestoreUnsynced} {
		t.Run(rule, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				Mutate(rule)
				msg := run(seed)
				Mutate("")
				if msg == "" {
					continue
				}
				if base := run(seed); base != "" {
					t.Fatalf("seed %d fails with the rule in force too: %s", seed, base)
				}
				t.Logf("mvcc/%s caught by TestWatchModel: %s\nreplay: EDICT_MUTATE=%s go test -tags edictmutate ./cmd/edictkv/internal/mvcc/ -run 'TestWatchModel/memory/seed=%d$' -count=1",
					rule, firstLine(msg), rule, seed)
				return
			}
			t.Fatalf("mvcc/%s: no failure in 10 seeds", rule)
		})
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return fmt.Sprint(s)
}
