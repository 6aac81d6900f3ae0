package sim

import (
	"testing"
	"time"
)

// The default detector (LowestLive) through MeasureDetector's script: a
// new leader after a crash within about a lease, none lost when a lower
// id recovers, and the checker finds nothing.
func TestMeasureDetectorLowestLive(t *testing.T) {
	f, err := MeasureDetector(Scenario{Name: "lowest-live", N: 5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", f)
	sc := Scenario{N: 5}.withDefaults()
	if f.AfterCrash <= 0 || f.AfterCrash > 3*sc.MaxLease() {
		t.Errorf("after a crash: %v without a leader, want (0, %v]", f.AfterCrash, 3*sc.MaxLease())
	}
	if f.AfterRecovery != 0 {
		t.Errorf("a lower id's recovery cost %v without a leader; the stability rule keeps the leader", f.AfterRecovery)
	}
	if f.AfterPartition <= 0 || f.SteadyMsgsPerSec <= 0 {
		t.Errorf("figures missing: %+v", f)
	}
	if f.Violation != "" {
		t.Error(f.Violation)
	}
	_ = time.Second
}
