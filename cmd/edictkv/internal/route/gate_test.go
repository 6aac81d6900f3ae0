package route_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

// A handover waits for the calls being served as leader, stops serving
// new ones here, and sends them to the next leader once it leads; a call
// that arrives while it waits is not served here.
func TestHandOverGate(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1, 2, 3)
	l, _ := c.leader()
	self := l.Status().ID
	r := route.New(l, 20*time.Second)
	defer r.Close()

	// A write in flight at the leader, held until released.
	inFlight, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- r.Do(context.Background(), false, func(context.Context) error {
			close(inFlight)
			<-release
			return nil
		}, never(t))
	}()
	<-inFlight

	type handed struct {
		to  edict.ProcessID
		err error
	}
	handedOver := make(chan handed, 1)
	go func() {
		to, err := r.HandOver(context.Background(), edict.None)
		handedOver <- handed{to, err}
	}()

	// Once the handover has begun, a call that arrives is not served
	// here: it waits, and goes to the next leader. Probe until a call is
	// refused, to know the handover has begun.
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		served := false
		err := r.Do(ctx, false, func(context.Context) error { served = true; return nil },
			func(context.Context, edict.ProcessID) error { return nil })
		cancel()
		if !served {
			require.ErrorIs(t, err, route.ErrNoLeader, "a probe not served waited out its context")
			break
		}
	}
	var servedHere atomic.Bool
	second := make(chan edict.ProcessID, 1)
	go func() {
		err := r.Do(context.Background(), false,
			func(context.Context) error { servedHere.Store(true); return nil },
			func(_ context.Context, leader edict.ProcessID) error { second <- leader; return nil })
		if err != nil {
			t.Errorf("the second call: %v", err)
		}
	}()

	// The handover waits for the write in flight: nothing moves while it
	// is held, however long that is.
	time.Sleep(200 * time.Millisecond)
	select {
	case h := <-handedOver:
		t.Fatalf("handed over to %v (%v) with a call in flight", h.to, h.err)
	default:
	}
	require.True(t, l.Status().IsLeader, "leadership moved under a call in flight")
	close(release)
	require.NoError(t, <-firstDone)

	h := <-handedOver
	require.NoError(t, h.err)
	require.NotEqual(t, self, h.to)
	require.Equal(t, h.to, <-second, "the waiting call went to the new leader")
	require.False(t, servedHere.Load(), "served at the old leader during the handover")

	// Not the leader any more: a handover is refused as the log refuses.
	_, err := r.HandOver(context.Background(), edict.None)
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
}

// Successor is the member that needs the least catching up; Transfer at
// a follower forwards, at the leader hands over.
func TestTransfer(t *testing.T) {
	c := newCluster(t, 3)
	c.start(1, 2, 3)
	l, f := c.leader()
	lr, fr := route.New(l, 10*time.Second), route.New(f, 10*time.Second)
	defer lr.Close()
	defer fr.Close()
	succ := lr.Successor()
	require.NotEqual(t, edict.None, succ)
	require.NotEqual(t, l.Status().ID, succ)

	var forwardedTo edict.ProcessID
	to, err := fr.Transfer(context.Background(), false, edict.None, func(_ context.Context, leader edict.ProcessID) error {
		forwardedTo = leader
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, edict.None, to, "the follower did not hand over itself")
	require.Equal(t, l.Status().ID, forwardedTo)

	// A transfer forwarded to a follower is refused at once.
	_, err = fr.Transfer(context.Background(), true, edict.None, nil)
	require.ErrorIs(t, err, route.ErrMisdirected)

	target := f.Status().ID
	to, err = lr.Transfer(context.Background(), false, target, func(context.Context, edict.ProcessID) error {
		return errors.New("the leader forwarded its own transfer")
	})
	require.NoError(t, err)
	require.Equal(t, target, to)
	require.Eventually(t, func() bool { return f.Status().IsLeader }, 10*time.Second, 10*time.Millisecond)
}
