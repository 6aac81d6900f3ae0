package edictlog_test

import (
	"fmt"
	"testing"
	"time"
)

// A stream of writes for many renewal intervals over TCP and bbolt: every
// write succeeds, and every node holds the last value of every key. That
// the leader keeps renewing its lease meanwhile, although its loop always
// has an event ready, is a timing claim, checked in virtual time
// (TestNewLeaderKeepsReignAfterHandoverUnderLoad runs the Core as the
// Node's loop does: after every event, Tick if a deadline has passed). On
// a busy machine the lease may move here, and the writes follow it; a
// write fails the test only if it finds no leader to take it for 20 s.
func TestWritesSucceedUnderAStream(t *testing.T) {
	c := newNetCluster(t, 3)
	c.waitLeader(20 * time.Second)
	want := map[string]string{}
	n := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); n++ {
		key, value := fmt.Sprintf("k%d", n%16), fmt.Sprint(n)
		c.put(key, value)
		want[key] = value
	}
	c.checkAllApplied(want, c.others(0)...)
	t.Logf("%d writes in 1.5s; leader now %v", n, c.waitLeader(20*time.Second).id)
}
