package fetzer

import (
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
)

func TestDefaultsSatisfyConstraints(t *testing.T) {
	c := Config{ID: 1, Members: []edict.ProcessID{1, 2, 3}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := c.withDefaults()
	t.Logf("lockTime=%v in (%v, %v], expires=%v > %v, κ=%v", d.LockTime, d.LockTimeMin(), d.LockTimeMax(), d.Expires, d.ExpiresMin(), c.Kappa())
	// κ of §IX C.1 with the defaults: (300+10+100)(1+1e-4) + 30 ms.
	if k := c.Kappa(); k < 440*time.Millisecond || k > 441*time.Millisecond {
		t.Errorf("κ = %v", k)
	}
}

func TestValidateRefuses(t *testing.T) {
	ok := Config{ID: 1, Members: []edict.ProcessID{1, 2, 3}}
	for name, tc := range map[string]struct {
		mut  func(*Config)
		want string
	}{
		"no id":         {func(c *Config) { c.ID = 0 }, "without an ID"},
		"not member":    {func(c *Config) { c.ID = 4 }, "not a member"},
		"duplicate":     {func(c *Config) { c.Members = []edict.ProcessID{1, 1} }, "duplicate"},
		"rho":           {func(c *Config) { c.Rho = 0.5 }, "ρ"},
		"δmin ≥ Δ":      {func(c *Config) { c.DeltaMin = 20 * time.Millisecond }, "δmin"},
		"EP ≤ σ":        {func(c *Config) { c.EP = 5 * time.Millisecond }, "EP"},
		"paper's §XI":   {func(c *Config) { c.Sigma, c.EP = 30*time.Millisecond, 50*time.Millisecond }, "lower bound"},
		"lockTime high": {func(c *Config) { c.LockTime = 90 * time.Millisecond }, "upper bound"},
		"lockTime low":  {func(c *Config) { c.LockTime = 30 * time.Millisecond }, "lower bound"},
		"expires short": {func(c *Config) { c.Expires = 120 * time.Millisecond }, "expires"},
	} {
		c := ok
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", name, err, tc.want)
		}
	}
}
