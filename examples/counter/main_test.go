package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestCounter runs the example: the counter reaches 15, and a follower
// stopped cleanly and restarted on a new port, with peers never told the
// new address, serves a linearizable read and then a write of its own; a
// follower killed and restarted serves a read too. The deadline is
// generous for a busy machine; the times are logged, against MaxLease:
// the clean stop's, the clean restart's first read, and the crash
// restart's, which includes the quarantine.
func TestCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, t.TempDir(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != 15 {
		t.Fatalf("counter before the restart = %d; want 15 (1+2+3+4+5)", res.Before)
	}
	if res.After != 21 {
		t.Fatalf("counter after the write through the restarted node = %d; want 21", res.After)
	}
	if res.NewAddr == res.OldAddr {
		t.Fatalf("node %v restarted on its old address %s", res.Restarted, res.OldAddr)
	}
	t.Logf("node %v stopped cleanly in %v; on a new port: read after %v, wrote after %v; node %v killed and restarted: read after %v; MaxLease %v",
		res.Restarted, res.Stopped.Round(time.Millisecond), res.Served.Round(time.Millisecond), res.Wrote.Round(time.Millisecond),
		res.Killed, res.CrashServed.Round(time.Millisecond), maxLease)
}
