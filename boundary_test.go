package edictlog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
)

// The store interfaces are declared twice, here for the embedder and in
// replog for the protocol, and a store built for one must serve the
// other: the same methods, with the same signatures.
func TestStoreInterfacesMatch(t *testing.T) {
	pairs := []struct{ ours, theirs reflect.Type }{
		{reflect.TypeFor[LogStore](), reflect.TypeFor[replog.LogStore]()},
		{reflect.TypeFor[StableStore](), reflect.TypeFor[replog.StableStore]()},
		{reflect.TypeFor[Store](), reflect.TypeFor[replog.Store]()},
		{reflect.TypeFor[SnapshotStore](), reflect.TypeFor[replog.SnapshotStore]()},
	}
	for _, p := range pairs {
		require.True(t, p.ours.Implements(p.theirs), "%v lacks a method of %v", p.ours, p.theirs)
		require.True(t, p.theirs.Implements(p.ours), "%v lacks a method of %v", p.theirs, p.ours)
	}
}

// A read level crosses the boundary as a number: both sides must number
// the levels alike.
func TestReadLevelsMatch(t *testing.T) {
	require.Equal(t, replog.ReadLease, coreLevel(ReadLease))
	require.Equal(t, replog.ReadFollower, coreLevel(ReadFollower))
	require.Equal(t, replog.ReadStale, coreLevel(ReadStale))
	require.Equal(t, []string{"lease", "follower", "stale", "unknown"},
		[]string{ReadLease.String(), ReadFollower.String(), ReadStale.String(), (ReadStale + 1).String()})
}

// Every kind of the protocol's events becomes the Node's kind of the same
// name, with its fields.
func TestEventFromCore(t *testing.T) {
	for k := replog.BecameLeader; k <= replog.Removed; k++ {
		ev := eventFromCore(replog.Event{Kind: k, Leader: 2, Epoch: 3, Index: 4, Reason: "why"})
		require.Equal(t, k.String(), ev.Kind.String())
		require.Equal(t, Event{Kind: ev.Kind, Leader: 2, Epoch: 3, Index: 4, Reason: "why"}, ev)
	}
}

// The protocol's refusals reach an embedder as this package's types, and
// its sentinels are the same values on both sides.
func TestFromDriver(t *testing.T) {
	var nl *NotLeaderError
	err := fromDriver(&replog.NotLeaderError{Leader: 3, Err: replog.ErrTransferring})
	require.True(t, errors.As(err, &nl))
	require.Equal(t, edict.ProcessID(3), nl.Leader)
	require.ErrorIs(t, err, ErrTransferring)

	var me *MembershipError
	err = fromDriver(&replog.MembershipError{Op: "remove", Process: 2, Epoch: 5, Live: []edict.ProcessID{1}, Err: replog.ErrQuorumLost})
	require.True(t, errors.As(err, &me))
	require.Equal(t, MembershipError{Op: "remove", Process: 2, Epoch: 5, Live: []edict.ProcessID{1}, Err: ErrQuorumLost}, *me)
	require.Equal(t, (&replog.MembershipError{Op: "remove", Process: 2, Epoch: 5, Live: []edict.ProcessID{1}, Err: replog.ErrQuorumLost}).Error(), me.Error())

	plain := errors.New("disk full")
	require.Equal(t, plain, fromDriver(plain))
}
