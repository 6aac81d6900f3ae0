package log_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/log"
)

// TestReproHandover reproduces an OPEN BUG, in about half the runs on a
// loaded 2-core machine: after a graceful handover to a recently restarted
// node, under a writer going as fast as it can, the new leader keeps
// renewing for a while, then one renewal gets no quorum in the 100ms before
// its lease ends and it steps down ("lease lost"), starting a new reign at
// once. No message is dropped. It leaves a client write with an unknown
// outcome (the edictkv end-to-end test tolerates exactly that). Run with
// EDICT_REPRO_HANDOVER=1 EDICT_TEST_LOG=1 and look for "lease lost".
func TestReproHandover(t *testing.T) {
	if os.Getenv("EDICT_REPRO_HANDOVER") == "" {
		t.Skip("reproduces an open liveness bug; set EDICT_REPRO_HANDOVER=1")
	}
	for iter := 0; iter < 6; iter++ {
		c := newNetCluster(t, 3, func(cfg *log.Config) { cfg.RoundTrip, cfg.RenewInterval = 10*time.Millisecond, 200*time.Millisecond })
		l := c.waitLeader(10 * time.Second)
		for i := 0; i < 20; i++ {
			c.put(fmt.Sprintf("pre%d", i), "v")
		}
		c.kill(l.id)
		l2 := c.waitLeader(10 * time.Second)
		c.put("post", "v")
		c.restart(l.id)
		time.Sleep(time.Second)
		var unknown, ok atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cmd, _ := fsm.EncodeCommand(fsm.Command{Put: &fsm.Put{Key: fmt.Sprintf("t%d", i), Value: "v"}})
				_, err := c.tryApply(cmd)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, log.ErrOutcomeUnknown):
					unknown.Add(1)
					t.Logf("iter %d: write %d outcome unknown at %v", iter, i, time.Now().Format("15:04:05.000"))
				}
			}
		}()
		time.Sleep(100 * time.Millisecond)
		t.Logf("iter %d: handing over from %v at %v", iter, l2.id, time.Now().Format("15:04:05.000"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = l2.Shutdown(ctx)
		cancel()
		for k := 0; k < 150; k++ {
			time.Sleep(10 * time.Millisecond)
			for _, id := range []edict.ProcessID{l.id} {
				if n := c.nodes[id]; n != nil {
					t.Logf("iter %d %s %v: %s", iter, time.Now().Format("05.000"), id, n.Debug(context.Background()))
				}
			}
		}
		close(stop)
		<-done
		delete(c.nodes, l2.id)
		l2.net.Close()
		l2.store.Close()
		t.Logf("iter %d: %d ok, %d unknown", iter, ok.Load(), unknown.Load())
		c.stopAll()
	}
}
