// Package omega implements the Ω leader elections of Aguilera,
// Delporte-Gallet, Fauconnier and Toueg, "Stable Leader Election" (DISC
// 2001), as
// elect.Protocol state machines for edictlog's weak leader election:
//
//   - Fig1 (NewFig1): the basic algorithm of §4, Fig. 1. Rounds r = 0, 1,
//     …; the leader of round k is process k mod n; it sends (OK, k) to all
//     every η; a process that hears no (OK, r) for longer than the timeout
//     starts round r+1 and names its leader at once (line 4). Theorem 1:
//     communication-efficient Ω with reliable links. Not stable (§5).
//   - Stable3 (NewStable3): §5, Fig. 2. A new round starts with leader ⊥
//     and elects its leader after two (OK, k) (lines 14–16); a process that
//     times out sends (STOP, r) to the abandoned leader (line 19), who
//     abdicates (line 21). Theorem 2: 3-stable.
//   - Stable6 (NewStable6): §6.3, Fig. 4, for lossy expiring links.
//     START goes to all (line 2); (ALERT, s) to all on starting round s
//     (line 1) makes a process in a lower round drop its leader (line 25)
//     and not elect for 6δ (line 16); a message from an old round is
//     answered with (START, r) (line 23). Theorem 4: 6-stable.
//   - ConstantTime (NewConstantTime): §7, Fig. 4 with line 20 replaced by
//     Fig. 5: on a timeout, send (ALERT, r+1) and (PING, r) to all, wait 2δ
//     for PONGs, and start the first round after r whose leader answered.
//     Theorem 5: 6-stable, election time 9δ when there are no slow links
//     or further crashes.
//
// Fig. 3 (the (n+4)-stable algorithm of §6.2) and Fig. 6 (◊P, §9) are not
// implemented: Fig. 4 supersedes the first, and the second is a failure
// detector, not an Ω.
//
// # Model (§2, §6.1)
//
// δ (Config.Delta) bounds a message's delay once a link is good; η
// (Config.Eta) is the leader's sending period, which the figures fix at δ
// (footnote 7); the timeout is footnote 1's Δ = δ+η, the figures' "2δ".
// A process is accessible when it is alive and its links both ways are
// good; Ω needs one eventually accessible process. k-stability (§3.3): if
// p is leader (every alive process names it) at t and was accessible
// during [t−kδ, t+1], p is still leader at t+1. Communication efficiency
// (§3.2): eventually only n−1 links (the leader's) carry messages.
//
// # Choices where the text is damaged or silent
//
//   - Process ids: the paper's processes are 0..n−1 and round k belongs to
//     k mod n. Here round k belongs to the (k mod n)-th of the sorted
//     Members, so round 0 is the lowest id.
//   - §6.3's prose says an ALERT suspends the leader "for δδ time units";
//     the extraction is damaged. Fig. 4 line 16 reads "within 6δ" and the
//     algorithm is 6-stable, so the window is 6δ (Config.AlertWindow).
//   - Messages to oneself: the leader's own (OK, r) is delivered at once
//     (as §9 assumes), so that its timer never expires while it leads and
//     its own two OKs elect it at home (Fig. 2 line 15). ALERT, START,
//     PING to oneself are not sent: they would be no-ops, or (START, s)
//     would re-enter StartRound; Fig. 5's own PONG is implicit (its
//     comment: "p responds to itself immediately").
//   - The OK that makes a process jump to round k (line 17/23/21) counts as
//     the first of the two (OK, k) of line 15: it was received, and the
//     paper's purpose — every process has seen one (OK, k) before anyone
//     elects — is met. An (OK, k) not from k's leader is ignored (§5's
//     prose: "two (OK, k) messages from k mod n").
//   - Fig. 5's "wait for 2δ" cannot block a state machine. The wait runs
//     beside the other handlers (which must keep answering PINGs, or two
//     processes pinging together would see nobody); the timeout is
//     suspended meanwhile; starting any round ends the wait (line 20.3).
//     "Smallest k' > r with k' mod n ∈ S" is searched over r+1..r+n.
//   - Expiring links (§6.1) are the transport's job, not this package's:
//     edict.Time readings of different processes are not comparable, so
//     a sender's timestamp could not be checked. The simulator meets the
//     definition when its MaxDelay ≤ δ. A deployment should set Delta
//     above the transport's worst delay, and drop late messages there.
//   - Drift: the paper's clocks are drift-free. With drift ρ, raise
//     Timeout (and Delta) by the factor (1+ρ)/(1−ρ) or more.
//   - Crash and recovery: the paper's crashes are permanent. A recovered
//     process is a new instance (elect.Protocol) that starts at round 0;
//     in Figs. 1 and 2 it learns the round from the leader's next OK, in
//     Fig. 4 also from the (START, r) answers to its (START, 0). The
//     stability checker counts it only once it first agrees with the
//     others (internal/sim/omegasim/checks.go).
//   - Observe is ignored: the figures' timeouts are their failure
//     detector. The round is exposed (Round) as §8's view number.
//
// # Election time bounds
//
// Theorem 5 gives 9δ for ConstantTime. For the others the paper says only
// "proportional to f" (§1.1 footnote 2, §7); electionBound derives δ+f·T
// for Fig. 1 and 2δ+f·T+η for Figs. 2 and 4 from the figures, where f is
// the number of consecutive dead round leaders and T the timeout.
//
// # Testing
//
// This package holds the algorithm and its unit tests. The paper's
// properties are checked in the simulator, by internal/sim/omegasim: Ω,
// communication efficiency, k-stability, the election times and §5's
// problem scenario 1, with negative controls, and the paper-versus-
// measured table of docs/detectors.md.
package omega
