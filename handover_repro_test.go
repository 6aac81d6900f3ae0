package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
)

// A graceful handover under a writer going as fast as it can, over TCP
// and bbolt, after the sequence an edictkv end-to-end test ran (a leader
// killed, a new one, the killed one back from disk): writes go on under
// the new leader, and every acknowledged write is on every running node.
// That the new leader keeps its reign meanwhile is a timing claim, checked
// in virtual time (TestNewLeaderKeepsReignAfterHandoverUnderLoad); on a busy
// machine leadership may move again here, and the writer retries through
// whoever leads. Every wait only bounds a hang.
func TestWritesGoOnThroughAHandoverUnderLoad(t *testing.T) {
	c := newNetCluster(t, 3)
	first := c.waitLeader(20 * time.Second)
	c.put("before", "v")
	c.kill(first.id)
	old := c.waitLeader(20 * time.Second)
	c.put("after", "v")
	restarted := c.restart(first.id)
	waitApplied(t, c.barrier(), restarted)

	// The writer's keys are its own, one per write, so that every
	// acknowledged one can be looked for at the end.
	var writes atomic.Int64
	var acked []string // the writer's until done is closed
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("w%d", i)
			_, err := c.tryApply(putCmd(t, key, "v"))
			switch {
			case err == nil:
				acked = append(acked, key)
				writes.Add(1)
			case errors.Is(err, edictlog.ErrNotCommitted), errors.Is(err, edictlog.ErrShutdown):
				// No effect: another edict took its index, or it reached
				// the old leader as it shut down.
			default:
				t.Errorf("write %d: %v", i, err)
			}
		}
	}()
	stopWriter := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	defer stopWriter()

	waitWrites := func(n int64, what string) {
		eventually(t, 30*time.Second, func() error {
			if w := writes.Load(); w < n {
				return fmt.Errorf("%d writes acknowledged %s, want %d", w, what, n)
			}
			return nil
		})
	}
	waitWrites(50, "before the handover")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := old.Shutdown(ctx) // resigns: hands leadership over
	cancel()
	if err != nil {
		t.Logf("the old leader's shutdown: %v", err)
	}
	atHandover := writes.Load()
	waitWrites(atHandover+50, "after the handover")
	time.Sleep(time.Second) // a longer stream under the new leader, not a deadline
	stopWriter()
	delete(c.nodes, old.id)
	old.net.Close()
	old.store.Close()

	running := c.others(old.id)
	waitApplied(t, c.barrier(), running...)
	for _, n := range running {
		have := map[string]bool{}
		for _, kv := range dump(t, n) {
			have[kv.Key] = true
		}
		for _, key := range acked {
			if !have[key] {
				t.Errorf("node %v lacks the acknowledged write %q", n.id, key)
			}
		}
	}
	t.Logf("%d writes acknowledged, %d of them after the handover; leader now %v", len(acked), int64(len(acked))-atHandover, c.waitLeader(20*time.Second).id)
}
