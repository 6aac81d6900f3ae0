package stollersim

import "testing"

func TestClaims(t *testing.T) {
	for _, c := range Claims(1) {
		t.Logf("%-14s N=%d %-30s paper: %s | measured: %s | holds=%v", c.Algorithm, c.N, c.Property, c.Paper, c.Measured, c.Holds)
		if !c.Holds {
			t.Errorf("claim does not hold: %+v", c)
		}
	}
}
