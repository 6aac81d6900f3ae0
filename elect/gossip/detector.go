package gossip

import (
	"cmp"
	"fmt"
	"log"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/hashicorp/memberlist"
)

// Detector is the default weak-leader detector (docs/protocol.md, "Leases"): memberlist
// says who is alive, the lease core says whose leases lapsed and who
// leads, and WeakLeader combines them (view.weakLeader). It is safe for
// concurrent use.
//
// Memberlist calls its delegates from its own goroutines; the Detector's
// delegates only copy what they are given into a channel (or, for
// NodeMeta, return bytes prepared beforehand). Everything that calls into
// memberlist — UpdateNode, Join — runs on goroutines of the Detector's
// own that memberlist never waits for, so no delegate can deadlock it.
type Detector struct {
	cfg   Config
	log   *slog.Logger
	ml    *memberlist.Memberlist
	clock edict.Clock

	mu         sync.Mutex
	v          view
	advertised Meta
	meta       atomic.Pointer[[]byte] // what NodeMeta returns

	events  chan nodeEvent
	publish chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

var _ elect.Detector = (*Detector)(nil)

// New starts a memberlist node and joins cfg.Join (a failed initial join is
// logged and retried every RejoinInterval, not returned: peers may simply
// not be up yet).
func New(cfg Config) (*Detector, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Detector{
		cfg:     c,
		log:     c.Logger.With("component", "gossip", "node", c.ID),
		clock:   c.Clock,
		v:       newView(c.ID, c.Epoch, c.Members, c.LeaderHintTTL),
		events:  make(chan nodeEvent, 256),
		publish: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	d.advertised = Meta{ID: c.ID, Epoch: c.Epoch, TransportAddr: c.TransportAddr, APIAddr: c.APIAddr}
	b, err := d.advertised.Encode()
	if err != nil {
		return nil, err
	}
	d.meta.Store(&b)

	mc := memberlistConfig(&c)
	mc.Name = nodeName(c.ID)
	if mc.BindAddr, mc.BindPort, err = splitHostPort(c.BindAddr); err != nil {
		return nil, err
	}
	mc.AdvertiseAddr, mc.AdvertisePort = "", mc.BindPort
	if c.AdvertiseAddr != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitHostPort(c.AdvertiseAddr); err != nil {
			return nil, err
		}
	}
	mc.Label = "edictlog:" + c.ClusterID
	mc.SecretKey = c.ClusterKey
	mc.Delegate = delegate{d}
	mc.Events = eventDelegate{events: d.events, stop: d.stop}
	mc.Logger = log.New(slogWriter{d.log}, "", 0)
	if c.Tune != nil {
		c.Tune(mc)
	}
	if d.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("gossip: start memberlist on %s: %w", c.BindAddr, err)
	}
	d.wg.Add(3)
	go d.loop()
	go d.publisher()
	go d.rejoiner()
	if len(c.Join) > 0 {
		if n, err := d.ml.Join(c.Join); err != nil {
			d.log.Warn("initial join failed; will retry", "peers", c.Join, "err", err)
		} else {
			d.log.Info("joined", "contacted", n)
		}
	}
	return d, nil
}

// LocalAddr is the gossip address others join.
func (d *Detector) LocalAddr() string { return d.ml.LocalNode().Address() }

// Observe implements elect.Detector. It never blocks on the network.
func (d *Detector) Observe(o elect.Observation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.v.observe(o)
	d.refreshMetaLocked(o.At)
}

// WeakLeader implements elect.Detector.
func (d *Detector) WeakLeader(now edict.Time) edict.ProcessID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.v.weakLeader(now)
}

// SetEpoch moves the detector to a new epoch and member set (after the
// log commits an epoch change) and advertises it.
func (d *Detector) SetEpoch(epoch uint64, members []edict.ProcessID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.v.setEpoch(epoch, members)
	d.refreshMetaLocked(d.clock.Now())
}

// Member is one node as this detector last heard of it.
type Member struct {
	Meta       Meta
	GossipAddr string
	Alive      bool
}

// Members returns every node heard of, by id; for the /v1/cluster view and
// for finding the leader's API address.
func (d *Detector) Members() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Member, 0, len(d.v.nodes))
	for _, n := range d.v.nodes {
		out = append(out, Member{Meta: n.meta, GossipAddr: n.addr, Alive: n.alive})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Meta.ID, b.Meta.ID) })
	return out
}

// Leave tells the other members this node is leaving, waits up to timeout
// for that to spread, and closes the detector. Use it on graceful
// shutdown; a crash is what Close alone looks like.
func (d *Detector) Leave(timeout time.Duration) error {
	err := d.ml.Leave(timeout)
	d.Close()
	if err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Close stops gossiping at once, without telling anyone: the others find
// out through their failure detection.
func (d *Detector) Close() error {
	var err error
	d.once.Do(func() {
		err = d.ml.Shutdown()
		close(d.stop)
		d.wg.Wait()
	})
	return err
}

// refreshMetaLocked recomputes the advertised metadata and, if it changed,
// stores it for NodeMeta and asks the publisher to gossip it.
func (d *Detector) refreshMetaLocked(now edict.Time) {
	m := d.advertised
	m.Epoch = d.v.epoch
	m.Leader = d.v.hint(now)
	if m == d.advertised {
		return
	}
	b, err := m.Encode()
	if err != nil {
		d.log.Error("cannot advertise metadata", "err", err) // bounded at New: not expected
		return
	}
	d.advertised = m
	d.meta.Store(&b)
	select {
	case d.publish <- struct{}{}:
	default: // a publish is pending and will carry the latest
	}
}

// loop applies memberlist's events to the view and expires the leader
// hint this node advertises.
func (d *Detector) loop() {
	defer d.wg.Done()
	tick := time.NewTicker(max(d.cfg.LeaderHintTTL/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case ev := <-d.events:
			d.apply(ev)
		case <-tick.C:
			d.mu.Lock()
			d.refreshMetaLocked(d.clock.Now())
			d.mu.Unlock()
		case <-d.stop:
			return
		}
	}
}

func (d *Detector) apply(ev nodeEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev.kind == nodeLeave {
		id, err := strconv.ParseUint(ev.name, 10, 64)
		if n := d.v.nodes[edict.ProcessID(id)]; err == nil && n != nil && n.alive {
			n.alive = false
			d.log.Info("member down", "member", edict.ProcessID(id), "addr", ev.addr)
		}
		return
	}
	m, err := DecodeMeta(ev.meta)
	if err == nil && nodeName(m.ID) != ev.name {
		err = fmt.Errorf("metadata names %v but the node is named %q", m.ID, ev.name)
	}
	if err != nil {
		// Such a node can never be weak leader; say so once per change.
		d.log.Warn("ignoring member with bad metadata", "name", ev.name, "addr", ev.addr, "err", err)
		return
	}
	n := d.v.nodes[m.ID]
	if n == nil || !n.alive {
		d.log.Info("member up", "member", m.ID, "addr", ev.addr, "epoch", m.Epoch)
	}
	d.v.nodes[m.ID] = &node{meta: m, addr: ev.addr, alive: true}
}

// publisher gossips metadata changes. UpdateNode waits for the broadcast,
// so it runs here rather than under the caller's lock.
func (d *Detector) publisher() {
	defer d.wg.Done()
	for {
		select {
		case <-d.publish:
			if err := d.ml.UpdateNode(time.Second); err != nil {
				d.log.Debug("metadata update not yet gossiped", "err", err)
			}
		case <-d.stop:
			return
		}
	}
}

// rejoiner joins configured peers that are not live members.
func (d *Detector) rejoiner() {
	defer d.wg.Done()
	tick := time.NewTicker(d.cfg.RejoinInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			d.rejoin()
		case <-d.stop:
			return
		}
	}
}

func (d *Detector) rejoin() {
	live := map[string]bool{d.LocalAddr(): true}
	d.mu.Lock()
	for _, n := range d.v.nodes {
		if n.alive {
			live[n.addr] = true
		}
	}
	d.mu.Unlock()
	var missing []string
	for _, a := range d.cfg.Join {
		if !live[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return
	}
	if n, err := d.ml.Join(missing); err != nil {
		d.log.Debug("rejoin failed", "peers", missing, "err", err)
	} else {
		d.log.Info("rejoined peers", "peers", missing, "contacted", n)
	}
}
