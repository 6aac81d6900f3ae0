package bullysim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClaims(t *testing.T) {
	rows := Claims(1)
	assert.Len(t, rows, 4*(6+5))
	for _, r := range rows {
		assert.True(t, r.Holds, "%s %s N=%d: paper %q, measured %q", r.Algorithm, r.Property, r.N, r.Paper, r.Measured)
		t.Logf("%-10s N=%d %-50s | %s | %s | %v", r.Algorithm, r.N, r.Property, r.Paper, r.Measured, r.Holds)
	}
}

// Bully's message count after a leader crash grows quadratically with N.
func TestBullyMessagesQuadratic(t *testing.T) {
	m := map[int]int{}
	for _, n := range []int{3, 5, 7, 9} {
		m[n] = runBullyCrash(n, 1, 3e6).messages
	}
	// (N−2)(N+3): 6, 24, 50, 84 — second differences constant (= 8).
	assert.Equal(t, m[9]-2*m[7]+m[5], m[7]-2*m[5]+m[3])
	assert.Positive(t, m[7]-2*m[5]+m[3])
}
