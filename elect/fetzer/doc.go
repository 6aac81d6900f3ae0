// Package fetzer is Fetzer and Cristian's highly available local leader
// election service ("A Highly Available Local Leader Election Service",
// IEEE Transactions on Software Engineering, 1999) as an
// elect.Protocol: a deterministic state machine, ticked and fed messages
// by the runtime or by the simulator (internal/sim/fetzersim checks it
// against the paper).
//
// # Model (§III, §IV)
//
// The timed asynchronous model: no bound on message or scheduling delays,
// but a one-way time-out δ that timely messages meet, a least delay δmin,
// a scheduling time-out σ, and hardware clocks with drift at most ρ that
// are not synchronised. A fail-aware datagram service classifies each
// delivered message as fast (a calculated bound on its delay is at most
// Δ > δ) or slow. A Δ-partition, the paper's stable partition, is a set of
// mutually connected processes from which every outsider is
// Δ-disconnected (all its messages are slow or lost).
//
// # Specification (§V, §VI)
//
// Leader_p(t) and supports^t(q, p) are instantiated in §IX: p is leader
// while H_p < expirationTime and imLeader; q supports p while p is leader
// and q ∈ supportSet_p.
//
//   - (T) a stable partition for κ has a local leader at some time within
//     those κ;
//   - (SO) a process supports at most one process at a time;
//   - (BI) a process connected to a local leader for κ supports it;
//   - (LS) a local leader supports itself.
//
// (SO) and (LS) make the closure of supports a set of disjoint logical
// partitions, each with at most one leader (§VI); a leader's logical
// partition is its support set (§X), which LocalLeader reports.
//
// # Protocol (§VII, §VIII, Figs. 30 and 31)
//
// Each process keeps an alive-set: the processes it had a fast message
// from within expires (independent assessment). A process that is the
// smallest id in its alive-set broadcasts Election(request, aliveSet)
// every EP. A receiver replies; the Reply is supportive — and locks the
// receiver to the candidate for lockTime — when the Election was fast, the
// candidate is the smallest id in the receiver's alive-set and not larger
// than the receiver, and the receiver is not locked to another process. The
// candidate becomes leader, until lastRequest + lockTime(1−2ρ), when it
// was in its own target set, every member of its current alive-set sent a
// fast supportive reply, it is the smallest of them, and there are at
// least minNumSupporters; a leader renews at expirationTime − 2Δ(1+ρ) − σ.
// A failed candidate that had support broadcasts Release. In majority mode
// (§X) minNumSupporters = ⌈(N+1)/2⌉: only a majority's logical partition
// has a leader, so there is at most one leader at a time.
//
// # Parameters and their constraints (§IX C, C.1, C.2, D)
//
//   - expires > (1+ρ)(EP(1+ρ) + Δ − δmin) and expires ≥ EP + 2(1+ρ)(Δ − δmin)
//     (Fig. 19): a timely candidate stays in its supporters' alive-sets;
//   - κ > (expires + σ + EP)(1+ρ) + 2Δ (C.1, timeliness), which exceeds the
//     bound κ ≥ 2Δ + (1+ρ)(expires + lockTime(1−2ρ)) of D (bounded
//     inconsistency); Config.Kappa returns the larger;
//   - (2Δ+σ)(1+3ρ) < lockTime ≤ (1−ρ)[(EP−σ)(1−ρ) − Δ + δmin] (C.2): a
//     leadership outlasts its own election, and a lock taken just before
//     the candidate's Election m1 is gone before its m2 arrives.
//
// Config.Validate refuses parameters that break them. The defaults (Δ =
// 15ms, δmin = 1ms, σ = 10ms, EP = 100ms, expires = 300ms, lockTime = the
// C.2 upper bound ≈ 76ms, ρ = 1e-4) give κ ≈ 440ms.
//
// # Choices where the text is damaged or disagrees with itself
//
//   - lockTime: §IX C.2 derives (1−ρ)[(EP−σ)(1−ρ) − Δ + δmin] and says the
//     protocol uses it; Fig. 30 initialises lockTime to
//     (1−ρ)(EP(1−ρ) − Δ + δmin), without σ, which is above the bound C.2
//     derives. We follow C.2 (the smaller, safe value). The parameters of
//     §XI (Δ = 15ms, σ = 30ms, EP = 50ms) break C.2's lower bound under
//     either formula (6ms or 36ms against 60ms); our default EP is raised
//     until both bounds hold.
//   - The else branch of aliveAC's WakeUp in Fig. 31 is garbled; we read it
//     as: a process that is not the smallest in its alive-set sends nothing
//     and sleeps until PurgeAliveSet's noMinBefore.
//   - Self-delivery: fa-broadcast delivers the Election to its sender too;
//     we deliver it locally at once, as a fast message, so the candidate
//     enters its own alive-set and, if it may lock, its replySet. Its
//     targetSet is taken before, so a candidate's first Election fails (as
//     §IX C.1 and D expect).
//   - Failed renewal: CheckIfLeader's else branch broadcasts Release but
//     leaves imLeader and expirationTime alone. A supporter that receives
//     the Release drops the lock of the new request — which replaced the
//     lock backing the running leadership — and may lock to another
//     process while still in the running leader's support set, breaking
//     (SO). We demote the leader before it releases.
//   - Bootstrap: the datagram service of [23] needs a recent round trip to
//     bound a delay, and the pseudo-code replies only to fast Elections, so
//     two processes that have never exchanged messages could never become
//     fast to each other. A slow Election is answered with a non-supportive
//     Reply (which cannot add support), so the next message is classified.
//     fast.go implements the round-trip bound and explains why Δ > 2δ−δmin.
//   - Recovery: §IX assumes a crashed process stays down for lockTime, so
//     its locks lapsed. A recovered process cannot know that, so an
//     Elector of Incarnation > 1 sends no supportive reply (nor supports
//     itself) for lockTime after it starts — the waiting the paper says the
//     assumption avoids.
//   - Renewal period: §X says a leader renews every
//     lockTime(1−2ρ) − 2Δ(1+ρ); Fig. 31 sets the alarm σ earlier,
//     expirationTime − 2Δ(1+ρ) − σ. We follow Fig. 31 (the safe one: a
//     late wake-up still renews in time).
//   - CheckIfLeader compares replySet with the alive-set purged at the
//     time of the check (Fig. 31 leaves it unpurged there).
//   - WeakLeader, which the paper does not have, names the process this
//     one is locked to (its own candidate included) or itself while
//     leader; Observe is ignored, as the alive-sets are the failure
//     detector.
package fetzer
