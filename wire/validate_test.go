package wire_test

import (
	"strings"
	"testing"

	"github.com/edictlog/edictlog/wire/wiretest"
)

// The message codec is transport's; wire owns the structural rules every
// message obeys, which its decoder checks once (Validate).

func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range wiretest.InvalidMessages() {
		if err := c.M.Validate(); err == nil || !strings.Contains(err.Error(), c.Want) {
			t.Errorf("%v: Validate = %v, want an error containing %q", c.M, err, c.Want)
		}
	}
	for _, m := range wiretest.Messages() {
		if err := m.Validate(); err != nil {
			t.Errorf("%v: Validate refuses a valid message: %v", m, err)
		}
	}
}
