// Package stoller implements the two leader elections of Scott D. Stoller,
// "Leader Election in Distributed Systems with Crash Failures" (1997), as
// elect.Protocol state machines (no goroutines, sockets or clock):
//
//   - [NewBully]: the Bully_FD algorithm of §4, Figure 1 — Garcia-Molina's
//     Bully algorithm with its time-outs replaced by a failure detector.
//     Model: a fixed set of nodes that crash and recover, stable storage
//     for the incarnation number, reliable FIFO links with delay at most
//     δ, and an FD that is complete (eq. 1) and accurate (eq. 2). It
//     satisfies SLE1 and SLE2 (§3) with c = c_S of eq. (5) ([BoundS]).
//   - [NewAsync]: the Asynchronous Bully algorithm of §7, Figure 3. Model:
//     crash/recovery, FIFO links that may lose messages and partition, and
//     an FD that is complete and, while the system is stable, accurate
//     with latency τ_FD (§6). It satisfies ALE1 and ALE2′ (§5, Theorem 1)
//     with c = c_A = O((N−1)·max(τ+2δ, τ_FD)) (Appendix B; [BoundA]).
//   - The FD module of §2 as the [FailureDetector] interface (Start_FD,
//     Stop_FD, ⟨DownSig, j⟩, and §7's PlayDead/PlayAlive), with §2's three
//     sketches: [NewPing] ("Are you alive?"), [NewAlive] ("I'm alive") and
//     [NewRing] (a token carrying an attendance list [Cri91, CS95]), and
//     [NewOracle] for the synchronous case.
//
// Node ids are priorities, lower is higher (§4). WeakLeader is ldr while
// status is Norm and None during an election, when §3 says ldr is not
// significant. Messages are named as in the figures (Halt, Ack, Rej, Ldr,
// Norm?, NotNorm) and encoded as a version byte and msgpack ([Encode],
// [Decode]). internal/sim/stollersim runs the algorithms in the simulator
// and checks SLE1/ALE1 against ground truth at every step, SLE2/ALE2′
// with [BoundS] and [BoundA], and the message counts.
//
// # Choices
//
// Where the text is damaged, ambiguous or silent:
//
//   - Typos in the figures: "acks ⊕= i" (On Ack) is acks ⊕= j; "down ⊕= i"
//     (On DownSig, Fig. 1) is down ⊕= j; "ldr := i" (On Ldr, Fig. 3) is
//     ldr := j; "send ⟨Ldr, t⟩ to acks" in ContinStage2, where t is
//     unbound, sends elid.
//   - The synchronous FD: Bully_FD's default FD is the [Oracle], fed by the
//     elect.ProcessDown/ProcessUp observations of the simulator's perfect
//     failure detector (its delay is τ_FD). Those report only changes, so a
//     node that starts after another crashed would never learn of it and
//     wait in stage 1 for ever; for a node it has no news of, the Oracle
//     probes with "Are you alive?" and reports it down after DefaultProbe.
//     Bully_FD also runs, and is tested, with the three message-based FDs.
//   - FIFO: §4 assumes FIFO links; the simulator reorders, and a leader's
//     first Norm? then overtook its Ldr and restarted the election for
//     nothing.
//     Each message carries a per-link sequence number and the receiver
//     restores the order, holding an early message up to Config.Hold (δ);
//     see fifo.go. The FDs' timeouts allow for the hold.
//   - Fig. 3's Rej handler does not test t = elid (the Ack handler does);
//     we test it, so that a stale Rej cannot skip a node.
//   - A new leader stops monitoring everyone (neither figure does): with
//     status Norm and ldr = i no DownSig changes anything, so this only
//     saves FD messages.
//   - Async: a message from a newer incarnation of j resends the pending
//     Halt to j, or counts as ⟨DownSig, j⟩ if j is our leader/organiser
//     (Async.restarted); and a Norm? for the election a node is waiting in
//     is taken as its lost Ldr. Without these, TestAsyncALE found runs that
//     stayed in Elec2 or Wait for ever after a crash/recovery or partition;
//     see the comments at the code for the histories.
//   - c_A is only given as O(·); [BoundA] takes the constant 2 plus one
//     detection and one δ, and says why.
//   - §7's message counts after a leader crash (½N²+O(N) average,
//     N²+O(N) worst) do not give the O(N) term; [AsyncAvgBound] and
//     [AsyncWorstBound] read it as 3N. For Bully_FD the paper gives no
//     count; [BullyMsgs] derives 3(N−2) from Figure 1.
//   - The ring FD leaves out §2's "Are you alive?" pinpointing after a
//     lost token: the regenerated token's attendance list pinpoints the
//     failure, one rotation later.
//   - "Remains in that state" (SLE2, ALE2′) is read as: the predicate,
//     once it holds after c, stays true until the next crash, recovery or
//     partition; before c it may come and go (the Asynchronous Bully can
//     elect two leaders and then merge them on Norm?).
package stoller
