// Package bully implements Garcia-Molina's two election algorithms (H.
// Garcia-Molina, "Elections in a Distributed Computing System", IEEE
// Trans. Computers C-31(1), 1982) as elect.Protocol state machines: the
// Bully Algorithm for synchronous systems and the Invitation Algorithm for
// asynchronous ones. The sources are P. Souto's lecture slides
// "Elections" (cited by slide title) and S. Stoller, "Leader Election in Distributed Systems
// with Crash Failures" (1997), §1, §4, §5, §7 and Appendix A, which
// corrects Garcia-Molina's specification.
//
// # System model
//
// The slides' list of assumptions is damaged (numbered 1, 4, 5, 3, 6, 7,
// 8, 9; 2 is missing); we rely on 5 (crash, then maybe recover), 8 and 9
// as numbered there, and not on 7 (FIFO), which the simulator does not give.
// Bully assumes 8 and 9: a message
// arrives within T, a node responds within Processing. Every timeout is
// derived from them (Config.Stage = 2(T + Processing) is one request–reply
// exchange); internal/sim/bullysim's CrashBound and CrashMessages state
// what follows. Invitation
// drops 8 and 9 (it must survive partitions) but uses the same timeouts
// to suspect failures. Clocks may drift (by ρ): bounds are divided
// by 1 − ρ. Neither algorithm keeps stable storage except the incarnation
// number, which names elections and groups (Config.Incarnation).
//
// # State
//
// S(i).s is Status (Down, Election, Reorganization, Normal), S(i).c the
// coordinator, S(i).h the node that halted i, S(i).d the definition (here
// the election or group that installed the coordinator; Garcia-Molina's
// application task list is abstracted away, as the slides do), S(i).g the
// group (Invitation). WeakLeader is S(i).c while Normal and None
// otherwise: the specification gives the coordinator meaning only in
// Normal (Assertions 1, 3), and a node mid-election should not campaign
// for the lease. Down is never observed: a crash drops the instance.
//
// # Choices where the sources are damaged or disagree
//
//  1. Priority. The slides make smaller ids stronger ("The Bully Election
//     Algorithm (1/3)", footnote: "G-M uses the inverse order"); Stoller
//     too (§4). We use Garcia-Molina's order, higher id stronger, so that
//     "the highest live id becomes coordinator".
//  2. Reorganization. The slides fold it away ("Specification: State",
//     footnote); we keep Garcia-Molina's state because the brief names
//     it. In Bully it lies between NewCoordinator and Ready: the new
//     coordinator waits T + Processing before Ready, which also restores
//     NewCoordinator-before-Ready without FIFO links (Assumption 7; the
//     simulator does not keep FIFO order), and a halted node that sees
//     Ready first accepts it. In Invitation a node is in Reorganization
//     from its Accept to the Ready.
//  3. ARE-U-THERE. "The Bully Election Algorithm (2/3)" has the stronger
//     receiver answer and start its own election; "The Actual Bully
//     Algorithm (2/3)" makes it a null RPC ("Receiver does not initiate
//     election"). We answer always and start an election only when the
//     receiver is Normal under a coordinator weaker than itself — the case
//     where it ought to win. Otherwise the backed-off candidate waits: it is
//     halted by a stronger candidate, or, if a coordinator is in place, it
//     answers that coordinator's Check with NO and is integrated by the
//     re-election that follows ("The Actual Bully Algorithm (3/3)").
//  4. Phase 1 probes all stronger nodes at once (Stoller §4, item 2), not
//     one by one as in Garcia-Molina's RPC loop.
//  5. Halt goes to the weaker nodes (slides, phase 2); those that answer
//     HaltAck form Up, and NewCoordinator and Ready go only to Up ("The
//     Actual Bully Algorithm (2/3)"). The candidate waits for every HaltAck
//     or one Stage. NewCoordinator and Ready get no reply: a node left out
//     times out and starts an election.
//  6. A Halt from a weaker node is refused, and the receiver starts its own
//     election. Garcia-Molina accepts any Halt; but a stronger node that
//     recovers just after a weaker one's phase 1 would then serve the
//     weaker coordinator for ever, and Assertion 2 with the strongest
//     winner would fail. Stoller's asynchronous algorithm (§7) likewise
//     rejects elections that give a node a lower-priority leader.
//  7. Every message carries the election or group id (Stoller §4, item 3),
//     so that a delayed reply from an old election is ignored.
//  8. Failure detection: the slides' failure suspector (no message from
//     the coordinator for CheckPeriod + Stage, then ARE-U-THERE to it, then
//     an election) and the coordinator's Check. If the runtime feeds
//     elect.ProcessDown observations, they act as Stoller's DownSig: an
//     election at once, and phase 1 skips nodes known to be down.
//  9. ARE-U-NORMAL is answered YES only when Normal under the asker (the
//     slides say "s == NORMAL"), so a node under another coordinator also
//     makes the coordinator reorganize.
//  10. Invitation: the ACK after READY is omitted (the slides ask "Is ACK
//     really needed?"; a member that misses READY times out into a
//     singleton group and is merged again). The merge delay "inversely
//     proportional to priority" is (N−1−rank)·(accept wait + Stage), so a
//     stronger merge ends before a weaker one begins. As in Garcia-Molina,
//     a Normal node accepts any Invitation, and a candidate merges the
//     coordinators it found before its delay — the source of Stoller's
//     outcome.
//  11. Assertion 4 versus 4′. The slides state Assertion 4 twice, the
//     second time ("Is the Invitation Algorithm Correct?") without the
//     group condition and without "in R"; we check Stoller's paraphrase
//     (§5), which has both. Stoller (App. A) shows the Invitation Algorithm
//     violates it; TestInvitationStollerFlaw reproduces that. The slides'
//     Assertion 4′ ("Solution (2/2)") and Stoller's ALE2 differ: 4′(a)
//     asks ⟨i, S(i).c⟩ ∈ E*, ALE2 asks that the coordinator be up; we
//     check both. The slides claim a theorem that Invitation satisfies
//     4′, but Stoller §7 says it does not satisfy ALE2 (only ALE2′): a
//     minimum clique cover is NP-hard to find. TestInvitationCliqueCover
//     runs Stoller's six-node example in two
//     variants: in all 20 runs Invitation reached the minimum cover, so we
//     found no counterexample to 4′ b and the disagreement stays open.
//
// This package holds the algorithms and their unit tests.
// internal/sim/bullysim runs both in the simulator and checks the
// assertions against ground truth after every step of every process, with
// negative controls, and gives the paper-versus-measured table of
// docs/detectors.md.
package bully
