package process

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// gossipAddr returns a localhost address whose port was free a moment ago
// for TCP and UDP (memberlist binds both).
func gossipAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free gossip port")
	return ""
}

// TestGossipFollowsEpoch: with gossip on, the processes run the gossip
// detector, and when a membership change moves the cluster to a new
// epoch every remaining process advertises that epoch through gossip
// (watchEpoch calls SetEpoch). Without it the detectors would keep
// gossiping the old epoch and no one would count the others eligible.
func TestGossipFollowsEpoch(t *testing.T) {
	addrs := map[edict.ProcessID]string{1: gossipAddr(t), 2: gossipAddr(t), 3: gossipAddr(t)}
	key := []byte("0123456789abcdef")
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.GossipAddr, cfg.ClusterKey = addrs[cfg.ID], key
		for id, a := range addrs {
			if id != cfg.ID {
				cfg.GossipJoin = append(cfg.GossipJoin, a)
			}
		}
	})
	for id, p := range c.procs {
		if p.gossip == nil || p.GossipAddr() != addrs[id] {
			t.Fatalf("node %d: gossip detector at %q, want %q", id, p.GossipAddr(), addrs[id])
		}
	}
	leader := c.leader()
	before := c.procs[leader].Node.Status().Epoch
	gone := c.follower(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A removal is refused while the leader has not heard from the member
	// that would be left with it (edictlog.ErrQuorumLost): the cluster may
	// have elected before every process was up.
	for {
		err := c.procs[leader].Node.Remove(ctx, gone)
		if err == nil {
			break
		}
		if !errors.Is(err, edictlog.ErrQuorumLost) || ctx.Err() != nil {
			t.Fatalf("remove %d: %v", gone, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var rest []edict.ProcessID
	for id := range c.procs {
		if id != gone {
			rest = append(rest, id)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var after uint64
		ok := true
		for _, id := range rest {
			st := c.procs[id].Node.Status()
			after = st.Epoch
			if st.Epoch == before {
				ok = false
				continue
			}
			// What the other remaining process hears this one advertise.
			other := rest[0]
			if other == id {
				other = rest[1]
			}
			heard := false
			for _, m := range c.procs[other].gossip.Members() {
				if m.Meta.ID == id && m.Alive && m.Meta.Epoch == st.Epoch {
					heard = true
				}
			}
			ok = ok && heard
		}
		if ok {
			t.Logf("epoch %d -> %d advertised through gossip", before, after)
			break
		}
		if time.Now().After(deadline) {
			for _, id := range rest {
				t.Logf("node %d: status epoch %d, gossip members %+v", id, c.procs[id].Node.Status().Epoch, c.procs[id].gossip.Members())
			}
			t.Fatalf("the remaining processes do not advertise the new epoch through gossip (was %d)", before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The two remaining processes still have a leader.
	c.leader()
}
