package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/wire"
)

// nopFSM is a state machine with no state, for tests of the log alone.
type nopFSM struct{}

func (nopFSM) Apply(fsm.Entry) any             { return nil }
func (nopFSM) Snapshot() (fsm.Snapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(r io.Reader) error       { _, err := io.Copy(io.Discard, r); return err }
func (nopSnapshot) Persist(w io.Writer) error  { return nil }
func (nopSnapshot) Release()                   {}

type nopSnapshot struct{}

// sendLog records the hand-overs (TimeoutNow) a transport sends.
type sendLog struct {
	mu        sync.Mutex
	handOvers []edict.ProcessID
}

func (l *sendLog) sent() []edict.ProcessID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.handOvers)
}

// recordingTransport is the kit's transport, whose sends sendLog sees.
type recordingTransport struct {
	*edictlogtest.Transport
	log *sendLog
}

func (t recordingTransport) Send(ctx context.Context, to edict.ProcessID, m wire.Message) error {
	err := t.Transport.Send(ctx, to, m)
	if err == nil && m.TimeoutNow != nil {
		t.log.mu.Lock()
		t.log.handOvers = append(t.log.handOvers, to)
		t.log.mu.Unlock()
	}
	return err
}

// A leader that removes itself returns from Remove only once it has
// handed leadership over and learned its removal: stopped at once after
// Remove (as an operator decommissioning it does), it leaves a leader of
// the next epoch, not a lease and an election. With 20 ms links the
// transfer follows the retirement's commit by a round trip at least, so a
// Remove that returned at that commit returned before it.
func TestRemoveLeaderReturnsAfterTheHandOver(t *testing.T) {
	net := edictlogtest.NewNetwork(edictlogtest.NetworkConfig{})
	defer net.Close()
	logs := map[edict.ProcessID]*sendLog{}
	var mu sync.Mutex
	c := edictlogtest.NewCluster(t, edictlogtest.ClusterConfig{
		Network: net,
		FSM:     func(edict.ProcessID, string) (fsm.FSM, error) { return nopFSM{}, nil },
		Tune: func(cfg *edictlog.Config) {
			mu.Lock()
			defer mu.Unlock()
			l := &sendLog{}
			logs[cfg.ID] = l
			cfg.Transport = recordingTransport{Transport: cfg.Transport.(*edictlogtest.Transport), log: l}
		},
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	net.SetDefault(edictlogtest.Link{MinDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond})

	epoch := c.Node(leader).Status().Epoch
	// A reign's first moments may not have heard from every member yet
	// (the quorum check then refuses, and nothing is written): try again.
	eventually(t, 20*time.Second, func() error {
		if err := c.Node(leader).Remove(ctx, leader); !errors.Is(err, edictlog.ErrQuorumLost) {
			require.NoError(t, err)
		} else {
			return err
		}
		return nil
	})
	mu.Lock()
	sent := logs[leader].sent()
	mu.Unlock()
	require.Len(t, sent, 1, "the removed leader's hand-over had left when Remove returned")
	require.NotEqual(t, leader, sent[0])
	c.Kill(leader)

	eventually(t, 20*time.Second, func() error {
		if s := c.Node(sent[0]).Status(); !s.IsLeader || s.Epoch <= epoch {
			return fmt.Errorf("the hand-over's target p%v does not lead an epoch after %d: %+v", sent[0], epoch, s)
		}
		return nil
	})
}
