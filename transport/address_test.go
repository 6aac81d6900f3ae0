package transport

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// heardLog records what WatchAddresses reports.
type heardLog struct {
	mu    sync.Mutex
	heard []announcedBy
	more  chan struct{}
}

type announcedBy struct {
	id   edict.ProcessID
	addr string
	inc  uint64
}

func watch(tr *TCP) *heardLog {
	h := &heardLog{more: make(chan struct{}, 64)}
	tr.WatchAddresses(func(id edict.ProcessID, addr string, inc uint64) {
		h.mu.Lock()
		h.heard = append(h.heard, announcedBy{id, addr, inc})
		h.mu.Unlock()
		h.more <- struct{}{}
	})
	return h
}

// next waits for the next report.
func (h *heardLog) next(t *testing.T) announcedBy {
	t.Helper()
	select {
	case <-h.more:
	case <-time.After(10 * time.Second):
		t.Fatal("no address announced within 10s")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heard[len(h.heard)-1]
}

// none fails if anything is reported within d.
func (h *heardLog) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-h.more:
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("announced %+v", h.heard[len(h.heard)-1])
	case <-time.After(d):
	}
}

func TestTCPAnnounceConnectsAndSaysWhereItListens(t *testing.T) {
	t.Parallel()
	nodes := newTCPNodes(t, 2, nil)
	a, b := nodes[0], nodes[1]
	heard := watch(b.TCP)
	// Announce alone, with no message sent, connects to every peer.
	a.Announce(7)
	if got, want := heard.next(t), (announcedBy{1, a.LocalAddr(), 7}); got != want {
		t.Fatalf("heard %+v, want %+v", got, want)
	}
	// The other lanes' hellos say the same: not reported again.
	if err := a.Send(ctxT(t, time.Second), 2, wire.Message{Append: wiretest.Append(0, 4, 100)}); err != nil {
		t.Fatal(err)
	}
	recv(t, b, 5*time.Second)
	heard.none(t, 200*time.Millisecond)

	// Process 1 restarted on a new port, in a later life: heard.
	a2 := newTCPNodes(t, 1, nil)[0]
	a2.AddPeer(2, b.LocalAddr())
	a2.Announce(8)
	if got, want := heard.next(t), (announcedBy{1, a2.LocalAddr(), 8}); got != want {
		t.Fatalf("heard %+v, want %+v", got, want)
	}
	// An earlier life still running (or its late connection): ignored.
	old := newTCPNodes(t, 1, nil)[0]
	old.AddPeer(2, b.LocalAddr())
	old.Announce(6)
	heard.none(t, 300*time.Millisecond)
	b.log.waitLog(t, "address of an earlier life ignored", "incarnation=6", "newest=8")
}

func TestTCPAnnouncesNoUndialableAddress(t *testing.T) {
	t.Parallel()
	b := newTCPNodes(t, 1, func(c *TCPConfig) { c.ID = 2 })[0]
	heard := watch(b.TCP)
	// Listening on every interface with no advertised address: the hello
	// names none, since "0.0.0.0:port" is no address a peer can dial.
	a := newTCPNodes(t, 1, func(c *TCPConfig) { c.BindAddr = "0.0.0.0:0" })[0]
	a.AddPeer(2, b.LocalAddr())
	a.Announce(3)
	if err := a.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
		t.Fatal(err)
	}
	recv(t, b, 5*time.Second)
	heard.none(t, 200*time.Millisecond)
	// With AdvertiseAddr, that is what it says.
	c := newTCPNodes(t, 1, func(c *TCPConfig) { c.ID = 3; c.BindAddr = "0.0.0.0:0"; c.AdvertiseAddr = "node3.example:7000" })[0]
	c.AddPeer(2, b.LocalAddr())
	c.Announce(1)
	if got, want := heard.next(t), (announcedBy{3, "node3.example:7000", 1}); got != want {
		t.Fatalf("heard %+v, want %+v", got, want)
	}
}

func TestTLSNodeIdentity(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "cluster")
	b := newTLSNode(t, 2, ca.issueNaming(t, "b", 2))
	heard := watch(b.TCP)

	// A certificate naming the id the hello claims: connected, and its
	// address believed.
	a := newTLSNode(t, 1, ca.issueNaming(t, "a", 1))
	a.AddPeer(2, b.LocalAddr())
	a.Announce(5)
	if got, want := heard.next(t), (announcedBy{1, a.LocalAddr(), 5}); got != want {
		t.Fatalf("heard %+v, want %+v", got, want)
	}

	// A certificate naming no id: connected as before, but what it says
	// of its address is not believed.
	anon := newTLSNode(t, 3, ca.issue(t, "anon"))
	anon.AddPeer(2, b.LocalAddr())
	anon.Announce(5)
	if err := anon.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(3, 2))); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b, 5*time.Second); m.From != 3 {
		t.Fatalf("got %v", m)
	}
	heard.none(t, 200*time.Millisecond)

	// A certificate naming another id: refused, whatever it says.
	impostor := newTLSNode(t, 4, ca.issueNaming(t, "impostor", 1))
	impostor.AddPeer(2, b.LocalAddr())
	impostor.Announce(9)
	impostor.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(4, 2)))
	b.log.waitLog(t, "refusing connection", "the certificate names nodes [p1], not p4")
	expectNothingFrom(t, b, 4, 200*time.Millisecond)
	heard.none(t, 100*time.Millisecond)

	// The dialer checks the acceptor too: b's certificate names 2 only,
	// so a dialer that meant to reach 5 there refuses it.
	lost := newTLSNode(t, 1, ca.issueNaming(t, "a2", 1))
	lost.AddPeer(5, b.LocalAddr())
	lost.Send(ctxT(t, time.Second), 5, wire.LeaseMessage(wiretest.Lease(1, 5)))
	line := lost.log.waitLog(t, "cannot connect to peer", "certificate names nodes [p2], not p5")
	if !strings.Contains(line, "peer=p5") {
		t.Fatalf("log line %q", line)
	}
}

func TestCertNodeIDs(t *testing.T) {
	ca := newTestCA(t, "cluster")
	files := ca.issueNaming(t, "x", 3, 12, 3)
	tl, err := loadTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	leaf := tl.server.Certificates[0].Leaf
	if got := certNodeIDs(leaf); len(got) != 2 || got[0] != 3 || got[1] != 12 {
		t.Fatalf("certNodeIDs = %v, want [p3 p12]", got)
	}
	if NodeURN(12) != "urn:edictlog:node:12" {
		t.Fatalf("NodeURN(12) = %q", NodeURN(12))
	}
}

// A lane that backed off dialing a dead address dials a new one at once.
func TestTCPNewAddressSkipsBackoff(t *testing.T) {
	t.Parallel()
	nodes := newTCPNodes(t, 2, nil)
	a, b := nodes[0], nodes[1]
	l := a.peer(2).control
	l.wmu.Lock()
	l.failures, l.failedAddr, l.retryAt = 5, "127.0.0.1:1", time.Now().Add(time.Hour)
	l.wmu.Unlock()
	a.AddPeer(2, "127.0.0.1:1") // the dead one: still backing off
	l.connectNow()
	l.wmu.Lock()
	if l.conn != nil {
		t.Fatal("dialed during the back-off")
	}
	l.wmu.Unlock()
	a.AddPeer(2, b.LocalAddr())
	l.connectNow()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.conn == nil || l.conn.addr != b.LocalAddr() {
		t.Fatal("the new address waited for the old one's back-off")
	}
}

func TestTCPRefusesAnAddressNoHelloCarries(t *testing.T) {
	_, err := NewTCP(TCPConfig{ID: 1, ClusterID: "test", BindAddr: "127.0.0.1:0", AdvertiseAddr: strings.Repeat("a", wire.MaxAddrLen+1)})
	if err == nil || !strings.Contains(err.Error(), "AdvertiseAddr") {
		t.Fatalf("NewTCP with a %d-byte AdvertiseAddr: %v", wire.MaxAddrLen+1, err)
	}
}
