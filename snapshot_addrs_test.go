package edictlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
)

// localTransport is a Transport that only says its own address.
type localTransport struct {
	Transport
	local string
}

func (l localTransport) LocalAddr() string { return l.local }

// liveTransport also says where it reaches its peers, as transport.TCP
// does.
type liveTransport struct {
	localTransport
	live map[edict.ProcessID]string
}

func (l liveTransport) PeerAddr(id edict.ProcessID) (string, bool) {
	a, ok := l.live[id]
	return a, ok
}

// What a leader puts on the snapshots it streams: the address of every
// process the snapshot names that it knows, the transport's where it has
// one, its own as the cluster was given it, and nothing a receiver would
// refuse.
func TestSnapshotAddrs(t *testing.T) {
	members, learners := []edict.ProcessID{1, 2, 3}, []edict.ProcessID{4, 5}
	known := map[edict.ProcessID]string{1: "given-1", 2: "known-2", 4: "known-4", 5: "", 9: "known-9"}
	n := &Node{cfg: Config{ID: 1, Transport: localTransport{local: "local-1"}}, peers: known}
	require.Equal(t, map[edict.ProcessID]string{1: "given-1", 2: "known-2", 4: "known-4"}, n.snapshotAddrs(members, learners))

	n.cfg.Transport = liveTransport{localTransport{local: "local-1"}, map[edict.ProcessID]string{1: "live-1", 3: "live-3", 4: "live-4"}}
	require.Equal(t, map[edict.ProcessID]string{1: "given-1", 2: "known-2", 3: "live-3", 4: "live-4"}, n.snapshotAddrs(members, learners))

	n.peers = map[edict.ProcessID]string{}
	require.Equal(t, map[edict.ProcessID]string{1: "local-1", 3: "live-3", 4: "live-4"}, n.snapshotAddrs(members, learners),
		"its own address from the transport when the cluster gave it none")

	n.cfg.Transport = localTransport{}
	require.Nil(t, n.snapshotAddrs(members, learners))
}
