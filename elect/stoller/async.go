package stoller

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Async is the Asynchronous Bully algorithm of §7, Figure 3. It assumes
// only crash failures and an FD that is complete (eq. 1) and, while the
// system is stable, accurate with latency τ_FD (§6); links may lose
// messages and partition. It satisfies ALE1 and ALE2′ (Theorem 1) with
// c = c_A = O((N−1)·max(τ+2δ, τ_FD)) (Appendix B).
//
// Choice: Async reacts to a message from a newer incarnation of j than
// it last heard (see restarted); Figure 3 does not.
type Async struct{ node }

var _ elect.Protocol = (*Async)(nil)

// NewAsync returns node cfg.ID's Asynchronous Bully instance; by default
// its FD is NewPing(FDConfig{}).
func NewAsync(cfg Config) *Async {
	a := &Async{}
	a.init(cfg, NewPing(FDConfig{}), a)
	a.restartIsDown = true
	return a
}

// recovery is Fig. 3's "On recovery": stage 1 is omitted (§7 item 4).
func (a *Async) recovery(now edict.Time) { a.startStage2(now) }

func (a *Async) startStage2(now edict.Time) {
	a.fd.PlayAlive(now, a.greater())
	a.elid = a.newElid()
	a.status = Elec2
	a.acks = nil
	a.pendack = a.self
	a.continStage2(now)
}

func (a *Async) message(now edict.Time, from edict.ProcessID, m Message) {
	switch m.Kind {
	case Halt:
		// Refuse an election that would give us a lower-priority leader
		// (§7 item 1).
		if (a.status == Norm && a.ldr < from) || (a.status == Wait && a.elid.Node < from) {
			a.send(from, Message{Kind: Rej, Elid: m.Elid})
			return
		}
		a.fd.PlayDead(now, a.greater())
		a.fd.Start(now, from)
		a.elid = m.Elid
		a.status = Wait
		a.send(from, Message{Kind: Ack, Elid: m.Elid})
	case Rej:
		// Choice: Fig. 3 does not test t = elid here, unlike for Ack; a
		// Rej from an earlier election (possible when messages are
		// delayed) would then skip a node of this one. We test it.
		if a.status == Elec2 && from == a.pending() && m.Elid == a.elid {
			a.continStage2(now)
		}
	case Ack:
		a.onAck(now, from, m.Elid)
	case Ldr:
		a.onLdr(now, from, m.Elid)
	case NormQ:
		// Choice: a Norm? for the very election we are waiting in means
		// its organiser finished it without us — it took a DownSig for
		// us as final while our Ack was on its way, so no Ldr will come.
		// Figure 3 would leave us in Wait for ever (neither disjunct of
		// its Norm? test holds, and the FD sees the organiser alive;
		// found by TestAsyncALE after a partition). We take the Norm? as
		// the Ldr: same group, same leader, so ALE1 is unaffected.
		if a.status == Wait && m.Elid == a.elid && from == a.elid.Node {
			a.onLdr(now, from, m.Elid)
			return
		}
		// §7 item 3: NotNorm also when an election by j would give us a
		// higher-priority leader.
		if (a.status != Norm && from < a.elid.Node) || (a.status == Norm && from < a.ldr) {
			a.send(from, Message{Kind: NotNorm, Elid: m.Elid})
		}
	case NotNorm:
		if a.status == Norm && a.ldr == a.id() && m.Elid == a.elid {
			a.startStage2(now)
		}
	}
}

func (a *Async) downSig(now edict.Time, j edict.ProcessID) {
	switch {
	case a.status == Norm && j == a.ldr, a.status == Wait && j == a.elid.Node:
		a.startStage2(now)
	case a.status == Elec2 && j == a.pending():
		a.continStage2(now)
	}
}

// BoundS is c_S of eq. (5): max(τ+2δ, τ_FD) + (N−1)·max(2δ, τ_FD) + δ.
func BoundS(n int, tau, delta, tauFD time.Duration) time.Duration {
	return max(tau+2*delta, tauFD) + time.Duration(n-1)*max(2*delta, tauFD) + delta
}

// BoundA is our reading of c_A (Appendix B), which the paper gives only
// as O((N−1)·max(τ+2δ, τ_FD)). Choice: the constant 2 and an additive
// τ_FD+δ — one detection of the leader's crash, then for each of the N−1
// other nodes up to two rounds (a halt that is answered, or detected, and
// the NotNorm round that repairs a node halted by a lower-priority
// organiser), then the Ldr message.
func BoundA(n int, tau, delta, tauFD time.Duration) time.Duration {
	return tauFD + 2*time.Duration(n-1)*max(tau+2*delta, tauFD) + delta
}

// restarted is called when a message shows that j crashed and recovered
// since we last heard from it. Without this an organiser whose Halt went
// to j while j was down, and j recovered before the FD reported it, waits
// for ever: eq. (1) lets the FD stay silent once j is up again ("the
// disjunct up_i"), and Figure 3 never resends a Halt (found by
// TestAsyncALE). So the Halt is resent to the new incarnation — a
// duplicate is harmless, Halting is idempotent and a second Ack is
// ignored. Skipping j instead would be wrong: the new incarnation may
// have received the Halt, and would then wait in Wait for a Ldr that is
// never sent (also found by TestAsyncALE). A restarted leader, or
// organiser we wait for, is treated as ⟨DownSig, j⟩: its old state is
// gone, and §6 asks accuracy only while nothing crashes or recovers.
func (a *Async) restarted(now edict.Time, j edict.ProcessID) {
	switch {
	case a.status == Elec2 && j == a.pending() && j != a.id():
		a.send(j, Message{Kind: Halt, Elid: a.elid})
	case a.status == Norm && j == a.ldr, a.status == Wait && j == a.elid.Node:
		a.downSig(now, j)
	}
}
