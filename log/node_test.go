package log_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
	"github.com/stretchr/testify/require"
)

// A leader under a steady stream of writes must keep renewing its lease:
// the runtime's loop always has an event ready, and its timers must fire
// anyway. Writes run for many renewal intervals; none may fail. The lease
// timings are relaxed so that CPU starvation from tests running beside
// this one (go test ./... runs packages in parallel) is not mistaken for
// the bug this test is about.
func TestLeaderKeepsLeaseUnderLoad(t *testing.T) {
	c := startBenchCluster(t, func(cfg *log.Config) {
		cfg.RoundTrip, cfg.RenewInterval = 50*time.Millisecond, 600*time.Millisecond
	})
	leader := c.leader(t)
	deadline := time.Now().Add(1500 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		cmd, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k%d", n%16), Value: "v"}})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = leader.Apply(ctx, cmd)
		cancel()
		require.NoError(t, err, "write %d", n)
		n++
	}
	require.True(t, leader.Status().IsLeader, "the leader kept its lease through %d writes", n)
	t.Logf("%d writes in 1.5s, leader unchanged", n)
}
