package omegasim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaims prints the paper-vs-measured table and requires every row to
// hold.
func TestClaims(t *testing.T) {
	rows := Claims(1)
	require.Len(t, rows, 4*(3*6+5)) // N=3 has one election row, others two
	for _, c := range rows {
		t.Logf("%-15s N=%d %-40s | %-60s | %s", c.Algorithm, c.N, c.Property, c.Paper, c.Measured)
		assert.True(t, c.Holds, "%s N=%d %s: paper %q, measured %q", c.Algorithm, c.N, c.Property, c.Paper, c.Measured)
	}
}
