package process

import (
	"fmt"
	"slices"
	"sync"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/detectors"
)

// paperDetector builds the weak leader election Config.Detector
// names, among the processes of raft (this one included), tuned to the
// lease's round trip, for the Node's incarnation inc: the algorithm's
// identifiers (Bully's elections, for one) must never repeat across
// restarts.
func (p *Process) paperDetector(raft map[edict.ProcessID]string, inc uint64) (elect.Detector, error) {
	lease := p.leaseTimings()
	factory, err := detectors.New(p.cfg.Detector, detectors.Options{MaxDelay: lease.RoundTrip / 2, MaxLease: lease.MaxLease})
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	members := []edict.ProcessID{p.cfg.ID}
	for id := range raft {
		if id != p.cfg.ID {
			members = append(members, id)
		}
	}
	slices.Sort(members)
	d := factory(p.cfg.ID, members, inc)
	if proto, ok := d.(elect.Protocol); ok {
		return &lockedProtocol{p: proto}, nil
	}
	return d, nil
}

// leaseTimings are the Node's lease timings, the library's defaults filled
// in as the Node fills them, for what is sized from them outside it.
func (p *Process) leaseTimings() elect.Config {
	c := elect.Config{Rho: p.cfg.Rho, RoundTrip: p.cfg.RoundTrip, RenewInterval: p.cfg.RenewInterval, MaxLease: p.cfg.Lease}
	c.ApplyDefaults()
	return c
}

// lockedProtocol lets the HTTP handlers ask a paper's algorithm for its
// local leader while the Node's loop drives it: every call holds mu.
type lockedProtocol struct {
	mu sync.Mutex
	p  elect.Protocol
}

func (l *lockedProtocol) Observe(o elect.Observation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Observe(o)
}

func (l *lockedProtocol) WeakLeader(now edict.Time) edict.ProcessID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.WeakLeader(now)
}

func (l *lockedProtocol) Tick(now edict.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Tick(now)
}

func (l *lockedProtocol) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Receive(now, from, payload)
}

func (l *lockedProtocol) Outbox() []elect.Outgoing {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.Outbox()
}

func (l *lockedProtocol) NextTick() edict.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.NextTick()
}

// localLeaderer is an election with local leaders of partitions (Fetzer
// and Cristian's): who leads this process's partition, with which
// support, and whether that support is a majority.
type localLeaderer interface {
	LocalLeader(now edict.Time) (leader edict.ProcessID, support []edict.ProcessID, authoritative bool)
}

// localLeader reports this process's local leader (Nerio §10.3), if the
// election has local leaders and this process has one.
func (l *lockedProtocol) localLeader(now edict.Time) (*kvjson.LocalLeaderJSON, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll, ok := l.p.(localLeaderer)
	if !ok {
		return nil, false
	}
	leader, support, auth := ll.LocalLeader(now)
	if leader == edict.None {
		return nil, false
	}
	out := &kvjson.LocalLeaderJSON{ID: uint64(leader), Support: make([]uint64, 0, len(support)), Authoritative: auth}
	for _, p := range support {
		out.Support = append(out.Support, uint64(p))
	}
	return out, true
}
