package gossip

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/hashicorp/memberlist"
)

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testClock(t testing.TB) edict.Clock {
	c, err := edict.NewSystemClock(1, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type cluster struct {
	t     *testing.T
	clock edict.Clock
	ids   []edict.ProcessID
	dets  map[edict.ProcessID]*Detector
	logs  map[edict.ProcessID]*logBuffer
	seeds []string
	tweak func(*Config)
}

// newCluster starts detectors for ids 1..n on 127.0.0.1, each joining the
// ones started before it.
func newCluster(t *testing.T, n int, tweak func(*Config)) *cluster {
	c := &cluster{t: t, clock: testClock(t), dets: map[edict.ProcessID]*Detector{}, logs: map[edict.ProcessID]*logBuffer{}, tweak: tweak}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, edict.ProcessID(i))
	}
	for _, id := range c.ids {
		d := c.start(id)
		c.seeds = append(c.seeds, d.LocalAddr())
	}
	return c
}

func (c *cluster) start(id edict.ProcessID) *Detector {
	c.t.Helper()
	lb := &logBuffer{}
	cfg := Config{
		ID: id, Clock: c.clock, ClusterID: "test", Epoch: 1, Members: c.ids,
		BindAddr: "127.0.0.1:0", Join: c.seeds, TransportAddr: fmt.Sprintf("127.0.0.1:%d", 7000+id),
		Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { d.Close() })
	c.dets[id], c.logs[id] = d, lb
	return d
}

// restartAt starts id anew, bound to addr.
func (c *cluster) restartAt(id edict.ProcessID, addr string) *Detector {
	tweak := c.tweak
	c.tweak = func(cfg *Config) {
		if tweak != nil {
			tweak(cfg)
		}
		cfg.BindAddr = addr
	}
	defer func() { c.tweak = tweak }()
	return c.start(id)
}

// waitAll waits until every detector in ids satisfies cond.
func (c *cluster) waitAll(what string, within time.Duration, ids []edict.ProcessID, cond func(*Detector) bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		ok := true
		for _, id := range ids {
			ok = ok && cond(c.dets[id])
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			var b strings.Builder
			for _, id := range ids {
				fmt.Fprintf(&b, "\n%v: weak leader %v, members %+v", id, c.dets[id].WeakLeader(c.clock.Now()), c.dets[id].Members())
			}
			c.t.Fatalf("not all of %v saw %s within %v:%s", ids, what, within, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cluster) leaderIs(p edict.ProcessID) func(*Detector) bool {
	return func(d *Detector) bool { return d.WeakLeader(c.clock.Now()) == p }
}

func aliveCount(n int) func(*Detector) bool {
	return func(d *Detector) bool {
		alive := 0
		for _, m := range d.Members() {
			if m.Alive {
				alive++
			}
		}
		return alive == n
	}
}

// TestKilledLeaderReplacedWithinTwoSeconds kills the weak leader of five
// (Close, no Leave: a crash) and measures how long the others take to name
// a new one with the default timing.
func TestKilledLeaderReplacedWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, nil)
	c.waitAll("five live members", 5*time.Second, c.ids, aliveCount(5))
	c.waitAll("p1 as weak leader", time.Second, c.ids, c.leaderIs(1))
	for _, m := range c.dets[3].Members() {
		if m.Meta.TransportAddr != fmt.Sprintf("127.0.0.1:%d", 7000+m.Meta.ID) || m.Meta.Epoch != 1 {
			t.Fatalf("metadata of %v gossiped as %+v", m.Meta.ID, m.Meta)
		}
	}
	c.dets[1].Close()
	took := c.waitAll("p2 as weak leader", 5*time.Second, c.ids[1:], c.leaderIs(2))
	t.Logf("weak leader replaced %v after the kill", took)
	if took >= 2*time.Second {
		t.Fatalf("new weak leader named after %v, want under 2s", took)
	}
}

// TestRecoveredLowerIDDoesNotUnseatLeader: while p2 holds the lease, p1
// coming back does not become weak leader anywhere, p1 included; once p2
// stops renewing, the role goes back to p1 (so the check can fail).
func TestRecoveredLowerIDDoesNotUnseatLeader(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *Config) { cfg.LeaderHintTTL = 600 * time.Millisecond })
	c.waitAll("three live members", 5*time.Second, c.ids, aliveCount(3))
	c.dets[1].Close()
	c.waitAll("p2 as weak leader", 5*time.Second, c.ids[1:], c.leaderIs(2))

	// p2 takes the lease and renews it; only its own core tells its
	// detector, the others learn it from p2's gossiped claim.
	stop := make(chan struct{})
	renewed := make(chan struct{})
	leader := c.dets[2]
	go func() {
		defer close(renewed)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			leader.Observe(elect.Observation{Kind: elect.LeaderSeen, Process: 2, At: c.clock.Now()})
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	c.waitAll("p2's claim", 3*time.Second, c.ids[2:], func(d *Detector) bool {
		for _, m := range d.Members() {
			if m.Meta.ID == 2 && m.Meta.Leader == 2 {
				return true
			}
		}
		return false
	})

	// p1 recovers: a new process at its configured gossip address.
	c.restartAt(1, c.seeds[0])
	c.waitAll("p1 back", 5*time.Second, c.ids, aliveCount(3))
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, id := range c.ids {
			if got := c.dets[id].WeakLeader(c.clock.Now()); got != 2 {
				t.Fatalf("%v names %v weak leader while p2 holds the lease", id, got)
			}
		}
	}
	close(stop)
	<-renewed
	took := c.waitAll("p1 as weak leader after p2 stopped renewing", 5*time.Second, c.ids, c.leaderIs(1))
	t.Logf("p1 named %v after p2's last renewal (hint TTL 600ms)", took)
}

// TestForeignNodesNotHeard: a node of another cluster, or without the
// gossip key, never becomes a member.
func TestForeignNodesNotHeard(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	c := newCluster(t, 2, func(cfg *Config) { cfg.ClusterKey = key })
	c.waitAll("two live members", 5*time.Second, c.ids, aliveCount(2))
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
	}{
		{"wrong key", func(cfg *Config) { cfg.ClusterKey = bytes.Repeat([]byte{8}, 32) }},
		{"no key", func(cfg *Config) { cfg.ClusterKey = nil }},
		{"other cluster", func(cfg *Config) { cfg.ClusterID = "other" }},
	} {
		lb := &logBuffer{}
		cfg := Config{ID: 9, Clock: c.clock, ClusterID: "test", Epoch: 1, BindAddr: "127.0.0.1:0", Join: c.seeds, ClusterKey: key,
			Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		tc.tweak(&cfg)
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lb.String(), "initial join failed") {
			t.Errorf("%s: joined: %s", tc.name, lb.String())
		}
		time.Sleep(300 * time.Millisecond)
		for _, id := range c.ids {
			for _, m := range c.dets[id].Members() {
				if m.Meta.ID == 9 {
					t.Errorf("%s: %v lists the foreign node: %+v", tc.name, id, m)
				}
			}
		}
		d.Close()
	}
}

// partitionable wraps memberlist's transport so a test can cut a node off:
// while blocked, it sends nothing (packets vanish, dials fail). Blocking
// both sides' outgoing traffic is a full partition.
type partitionable struct {
	memberlist.NodeAwareTransport
	mu      sync.Mutex
	blocked bool   // everything
	addr    string // or only this destination
}

func (p *partitionable) isBlocked(to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked || (p.addr != "" && p.addr == to)
}

func (p *partitionable) blockAddr(a string) {
	p.mu.Lock()
	p.addr = a
	p.mu.Unlock()
}

func (p *partitionable) set(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
}

func (p *partitionable) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if p.isBlocked(a.Addr) {
		return time.Now(), nil
	}
	return p.NodeAwareTransport.WriteToAddress(b, a)
}

func (p *partitionable) DialAddressTimeout(a memberlist.Address, d time.Duration) (net.Conn, error) {
	if p.isBlocked(a.Addr) {
		return nil, fmt.Errorf("partitioned")
	}
	return p.NodeAwareTransport.DialAddressTimeout(a, d)
}

// withPartitionable makes a detector's memberlist use a partitionable
// transport.
func withPartitionable(t *testing.T, p **partitionable) func(*memberlist.Config) {
	return func(mc *memberlist.Config) {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger})
		if err != nil {
			t.Fatal(err)
		}
		*p = &partitionable{NodeAwareTransport: nt}
		mc.Transport = *p
	}
}

// TestRejoinHealsLongPartition cuts p1 off until both sides declare each
// other dead and memberlist would no longer gossip to the dead; after the
// partition heals, the periodic re-join brings them back together. With
// re-joining effectively off, they stay apart (the negative control).
func TestRejoinHealsLongPartition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rejoin time.Duration
		heals  bool
	}{{"rejoin", 200 * time.Millisecond, true}, {"no rejoin", time.Hour, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p1 *partitionable
			others := map[edict.ProcessID]*partitionable{}
			var c *cluster
			c = newCluster(t, 3, func(cfg *Config) {
				cfg.RejoinInterval = tc.rejoin
				id := cfg.ID
				inner := func(mc *memberlist.Config) {
					// Stop gossiping to the dead soon, so only a re-join
					// can heal the partition.
					mc.GossipToTheDeadTime = 100 * time.Millisecond
				}
				var p *partitionable
				wrap := withPartitionable(t, &p)
				cfg.Tune = func(mc *memberlist.Config) {
					inner(mc)
					wrap(mc)
					if id == 1 {
						p1 = p
					} else {
						others[id] = p
					}
				}
			})
			c.waitAll("three live members", 5*time.Second, c.ids, aliveCount(3))
			// p1 sends nothing, and 2 and 3 send nothing to p1.
			p1.set(true)
			for _, p := range others {
				p.blockAddr(c.dets[1].LocalAddr())
			}
			c.waitAll("p1 dead", 5*time.Second, c.ids[1:], aliveCount(2))
			c.waitAll("the others dead", 5*time.Second, c.ids[:1], aliveCount(1))
			time.Sleep(300 * time.Millisecond) // past GossipToTheDeadTime
			p1.set(false)
			for _, p := range others {
				p.blockAddr("")
			}
			if tc.heals {
				took := c.waitAll("three live members again", 5*time.Second, c.ids, aliveCount(3))
				t.Logf("healed %v after the partition ended", took)
				return
			}
			time.Sleep(2 * time.Second)
			for _, id := range c.ids[1:] {
				if aliveCount(3)(c.dets[id]) {
					t.Fatalf("%v healed without re-joining: the test cannot tell re-joining works", id)
				}
			}
		})
	}
}
