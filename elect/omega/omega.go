package omega

import (
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Omega is one process's instance of a variant. Its fields follow the
// figures: r, leader and the timer; the rest is bookkeeping for
// "have not sent (OK, r) within δ", "received at least two (OK, k)",
// Fig. 4's recent ALERTs and Fig. 5's wait for PONGs.
type Omega struct {
	v       Variant
	cfg     Config
	self    edict.ProcessID
	members []edict.ProcessID

	started bool
	r       uint64          // current round
	leader  edict.ProcessID // output of Ω; None is ⊥
	oks     int             // (OK, r) received in round r
	timer   edict.Time      // when the timer was last restarted
	sentOK  bool            // sent (OK, r) in round r …
	lastOK  edict.Time      // … last at this reading

	// alerts is Fig. 4's memory of recent (ALERT, k'): only its Pareto
	// frontier (no entry both older and of a lower round than another),
	// so oldest first with rounds decreasing; alerts[0] decides line 16.
	alerts []alertSeen

	// Fig. 5's wait (lines 20.1–20.6), run beside the other handlers.
	pinging   bool
	pingRound uint64
	pingUntil edict.Time
	pongs     map[edict.ProcessID]bool

	out []elect.Outgoing
	// Dropped counts payloads that did not decode or came from a
	// non-member.
	Dropped int
}

type alertSeen struct {
	at    edict.Time
	round uint64
}

var _ elect.Protocol = (*Omega)(nil)

// New returns variant v's instance for cfg.
func New(v Variant, cfg Config) (*Omega, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Omega{v: v, cfg: cfg, self: cfg.ID, members: cfg.Members, pongs: map[edict.ProcessID]bool{}}, nil
}

// NewFig1 returns the basic algorithm of Fig. 1.
func NewFig1(cfg Config) (*Omega, error) { return New(Fig1, cfg) }

// NewStable3 returns the 3-stable algorithm of Fig. 2.
func NewStable3(cfg Config) (*Omega, error) { return New(Stable3, cfg) }

// NewStable6 returns the 6-stable algorithm of Fig. 4.
func NewStable6(cfg Config) (*Omega, error) { return New(Stable6, cfg) }

// NewConstantTime returns Fig. 4 with line 20 replaced by Fig. 5.
func NewConstantTime(cfg Config) (*Omega, error) { return New(ConstantTime, cfg) }

// Variant is the algorithm this instance runs.
func (o *Omega) Variant() Variant { return o.v }

// Round is the current round r; with the leader it is the view number of
// Ω+ (§8).
func (o *Omega) Round() uint64 { return o.r }

// roundLeader is "k mod n".
func (o *Omega) roundLeader(k uint64) edict.ProcessID {
	return o.members[k%uint64(len(o.members))]
}

func (o *Omega) send(to edict.ProcessID, k Kind, round uint64) {
	o.out = append(o.out, elect.Outgoing{To: to, Payload: Encode(Message{Kind: k, Round: round})})
}

// sendAll sends to every other member: messages to oneself are handled
// where the figures need them (OK, Fig. 5's own PONG).
func (o *Omega) sendAll(k Kind, round uint64) {
	for _, m := range o.members {
		if m != o.self {
			o.send(m, k, round)
		}
	}
}

// init is "on initialization: StartRound(0)", run at the first reading
// the instance is given.
func (o *Omega) init(now edict.Time) {
	if !o.started {
		o.started = true
		o.startRound(now, 0)
	}
}

// startRound is procedure StartRound(s) (line 1–6 of each figure).
func (o *Omega) startRound(now edict.Time, s uint64) {
	if o.v >= Stable6 {
		o.sendAll(Alert, s) // Fig. 4 line 1
	}
	if l := o.roundLeader(s); l != o.self {
		if o.v >= Stable6 {
			o.sendAll(Start, s) // Fig. 4 line 2: bring all to the new round
		} else {
			o.send(l, Start, s) // Figs. 1, 2 line 2: wake the new leader
		}
	}
	o.r = s
	if o.v == Fig1 {
		o.leader = o.roundLeader(s) // Fig. 1 line 4
	} else {
		o.leader = edict.None // Fig. 2 line 5: do not elect quite yet
	}
	o.oks = 0
	o.sentOK = false
	o.timer = now
	o.pinging = false // Fig. 5 line 20.3: a new round ends the wait
}

// task0 sends (OK, r) to all every η while this process leads round r,
// and delivers it to itself at once (as §9 assumes), which keeps its own
// timer from expiring and counts towards its own election.
func (o *Omega) task0(now edict.Time) {
	if o.roundLeader(o.r) != o.self || (o.sentOK && now.Before(o.lastOK.Add(o.cfg.Eta))) {
		return
	}
	o.sentOK, o.lastOK = true, now
	o.sendAll(OK, o.r)
	o.onOK(now, o.self, o.r)
}

// Tick implements elect.Protocol: the timeout, the end of Fig. 5's wait,
// and task 0. Early calls do nothing but what is due.
func (o *Omega) Tick(now edict.Time) {
	o.init(now)
	switch {
	case o.pinging && !now.Before(o.pingUntil):
		o.endPing(now)
	case !o.pinging && now.After(o.timer.Add(o.cfg.Timeout)):
		o.timeout(now)
	}
	o.task0(now)
}

// timeout is "upon timer > 2δ".
func (o *Omega) timeout(now edict.Time) {
	switch o.v {
	case Stable3:
		if l := o.roundLeader(o.r); l != o.self {
			o.send(l, Stop, o.r) // Fig. 2 line 19
		}
		o.startRound(now, o.r+1)
	case ConstantTime:
		// Fig. 5 lines 20–20.2. Our own PONG is implicit (endPing).
		o.sendAll(Alert, o.r+1)
		o.sendAll(Ping, o.r)
		o.pinging, o.pingRound, o.pingUntil = true, o.r, now.Add(o.cfg.PingWait)
		clear(o.pongs)
	default:
		o.startRound(now, o.r+1) // Fig. 1 line 16, Fig. 4 line 20
	}
}

// endPing is Fig. 5 lines 20.4–20.6: skip the rounds of the silent.
func (o *Omega) endPing(now edict.Time) {
	o.pinging = false
	n := uint64(len(o.members))
	for k := o.r + 1; k <= o.r+n; k++ {
		if l := o.roundLeader(k); l == o.self || o.pongs[l] {
			o.startRound(now, k)
			return
		}
	}
}

// Receive implements elect.Protocol: task 1's "upon receive" clauses.
func (o *Omega) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	o.init(now)
	m, err := Decode(payload)
	if err != nil || from == o.self || !slices.Contains(o.members, from) {
		o.Dropped++
		return
	}
	k := m.Round
	switch m.Kind {
	case OK:
		o.onOK(now, from, k)
	case Start:
		if k > o.r {
			o.startRound(now, k) // line 17 (Fig. 1), 23 (Fig. 2), 21 (Fig. 4)
		} else if k < o.r && o.v >= Stable6 {
			o.send(from, Start, o.r) // Fig. 4 line 23
		}
	case Stop:
		if o.v == Stable3 && k >= o.r {
			o.startRound(now, k+1) // Fig. 2 line 21
		}
	case Alert:
		if o.v >= Stable6 && k > o.r {
			o.leader = edict.None // Fig. 4 line 25
			o.noteAlert(now, k)
		}
	case Ping:
		if o.v == ConstantTime {
			o.send(from, Pong, k) // Fig. 5 line 20.7
		}
	case Pong:
		if o.v == ConstantTime && o.pinging && k == o.pingRound {
			o.pongs[from] = true
		}
	}
	o.task0(now)
}

// onOK is the (OK, k) clauses. An OK not from k's leader is ignored: only
// it sends (OK, k), and the text (§5) says "two (OK, k) messages from
// k mod n".
func (o *Omega) onOK(now edict.Time, from edict.ProcessID, k uint64) {
	if from != o.roundLeader(k) {
		return
	}
	switch {
	case k > o.r:
		// Line 17/23/21: jump to round k. The OK that made us jump counts
		// as the first of round k (see the package comment).
		o.startRound(now, k)
		o.oks = 1
		if o.v == Fig1 {
			return
		}
		o.maybeElect(now)
	case k == o.r:
		o.oks++
		o.maybeElect(now)
		o.timer = now // restart timer
	default:
		if o.v >= Stable6 {
			o.send(from, Start, o.r) // Fig. 4 line 23
		}
	}
}

// maybeElect is Fig. 2 lines 15–16, Fig. 4 lines 15–17.
func (o *Omega) maybeElect(now edict.Time) {
	if o.v == Fig1 || o.leader != edict.None || o.oks < 2 {
		return
	}
	if o.v >= Stable6 && o.alertAbove(now, o.r) {
		return
	}
	o.leader = o.roundLeader(o.r)
}

// noteAlert remembers (ALERT, k) received now.
func (o *Omega) noteAlert(now edict.Time, k uint64) {
	o.pruneAlerts(now)
	for len(o.alerts) > 0 && o.alerts[len(o.alerts)-1].round <= k {
		o.alerts = o.alerts[:len(o.alerts)-1]
	}
	o.alerts = append(o.alerts, alertSeen{at: now, round: k})
}

func (o *Omega) pruneAlerts(now edict.Time) {
	from := now.Add(-o.cfg.AlertWindow)
	i := 0
	for i < len(o.alerts) && o.alerts[i].at.Before(from) {
		i++
	}
	o.alerts = o.alerts[i:]
}

// alertAbove is "received (ALERT, k') with k' > k within 6δ".
func (o *Omega) alertAbove(now edict.Time, k uint64) bool {
	o.pruneAlerts(now)
	return len(o.alerts) > 0 && o.alerts[0].round > k
}

// Outbox implements elect.Protocol.
func (o *Omega) Outbox() []elect.Outgoing {
	out := o.out
	o.out = nil
	return out
}

// NextTick implements elect.Protocol: the earliest of the timeout, the
// end of Fig. 5's wait and the leader's next OK.
func (o *Omega) NextTick() edict.Time {
	if !o.started {
		return edict.Time{Incarnation: o.cfg.Incarnation}
	}
	next := o.timer.Add(o.cfg.Timeout + 1) // "timer > 2δ": strictly after
	if o.pinging {
		next = o.pingUntil
	}
	if o.roundLeader(o.r) == o.self {
		ok := o.lastOK.Add(o.cfg.Eta)
		if !o.sentOK {
			ok = o.timer
		}
		if ok.Before(next) {
			next = ok
		}
	}
	return next
}

// WeakLeader implements elect.Detector: the figures' leader variable.
func (o *Omega) WeakLeader(edict.Time) edict.ProcessID { return o.leader }

// Observe implements elect.Detector. The figures use no failure detector
// of their own — their timeouts are the detector — so observations are
// ignored.
func (o *Omega) Observe(elect.Observation) {}
