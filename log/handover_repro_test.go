package log_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// After a graceful handover, under a writer going as fast as it can, the
// new leader must keep its reign: its renewals must not be lost. They once
// were, in about half the runs: every proposal's reading moved the lease
// core past its renewal point, which then vanished from NextTick, so the
// runtime never ticked and the lease lapsed (the edictkv end-to-end test
// saw writes with an unknown outcome). Default lease timings, as in
// production.
func TestNewLeaderKeepsReignAfterHandoverUnderLoad(t *testing.T) {
	for iter := range 3 {
		c := newNetCluster(t, 3, func(cfg *log.Config) { cfg.RoundTrip, cfg.RenewInterval = 10*time.Millisecond, 200*time.Millisecond })
		// The sequence the end-to-end test ran: a leader killed, a new one,
		// the killed one back from disk (past its quarantine), a handover.
		first := c.waitLeader(10 * time.Second)
		c.put("before", "v")
		c.kill(first.id)
		old := c.waitLeader(10 * time.Second)
		c.put("after", "v")
		c.restart(first.id)
		time.Sleep(time.Second)
		var writes atomic.Int64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cmd, _ := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k%d", i%64), Value: "v"}})
				if _, err := c.tryApply(cmd); err == nil {
					writes.Add(1)
				}
			}
		}()
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = old.Shutdown(ctx) // resigns: hands leadership over
		cancel()
		var leader *netNode
		for deadline := time.Now().Add(5 * time.Second); leader == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, n := range c.others(old.id) {
				if n.Status().IsLeader {
					leader = n
				}
			}
		}
		if leader == nil {
			close(stop)
			<-done
			t.Fatalf("iteration %d: no leader after the handover", iter)
		}
		reign := leader.Status().Reign
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			st := leader.Status()
			if !st.IsLeader || !st.Reign.Equal(reign) {
				close(stop)
				<-done
				t.Fatalf("iteration %d: the new leader %v lost its reign under load (leader now %v): %s", iter, leader.id, st.Leader, leader.Debug(context.Background()))
			}
		}
		close(stop)
		<-done
		t.Logf("iteration %d: %v kept its reign through %d writes", iter, leader.id, writes.Load())
		delete(c.nodes, old.id)
		old.net.Close()
		old.store.Close()
		c.stopAll()
	}
}
