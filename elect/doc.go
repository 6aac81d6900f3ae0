// Package elect is the Nerio lease protocol as a deterministic state machine,
// and the weak-leader detectors that tell it when to try for the lease.
//
// A [Core] has no goroutines, sockets, disk or clock of its own: the caller
// (the edictlog.Node runtime, or the simulator in internal/sim) feeds it clock
// readings and messages through [Core.Tick] and [Core.Step] and collects
// what it must do from [Core.Ready] — records to persist first, then
// messages to send, and events — in the manner of etcd-raft's Ready.
//
// Its vocabulary is package wire's, which sits below it and below the log
// it serves: the messages it exchanges (wire.Lease), the per-epoch records
// it asks to persist (wire.EpochRecord), the epoch configurations it is
// given (wire.EpochConfig: an epoch's quorums are the majorities of its
// members, the only quorum system the epoch news every message carries can
// name; learners are the log's business and the lease core ignores them),
// and the log positions grants report (wire.Position). So the log and the
// transport hand the core what they hold, with no conversion between them.
//
// Section and equation numbers refer to van Renesse, Schneider and Gehrke,
// "Nerio: Leader Election and Edict Ordering". The core implements:
//
//   - OQwBD (§3, the default) and OQwBS (§4) to obtain and renew a lease;
//   - grants with explicit nacks naming the grantee (§10.2, §10.4);
//   - release (§6) and revocation (§10.2), ordered per sender by the
//     sender's own clock readings rather than by the transport;
//   - leader verification (§10.5), with the formula re-derived (verify.go);
//   - δ and the renewal point of §10.1, and the stability rule of §9;
//     the renewal starts earlier, and δ is longer (never past MaxLease),
//     while this process has seen renewals stall lately (the adaptive
//     lead: liveness only, safety rests on δ ≤ MaxLease alone);
//   - the restart quarantine of docs/protocol.md, "Clocks", which stands in for a persisted
//     grant: after a restart a process grants nothing (and wedges nothing)
//     for (1+ρ)·MaxLease, and refuses requests for δ > MaxLease; none
//     after a clean stop (Retire, retire.go), whose life granted nothing
//     more and waited until every grant it made had lapsed;
//   - epochs and wedging, grantRequest(⊥, ∞) (§10.6), with per-epoch state.
//
// Invariants, asserted where they are maintained and checked against
// ground truth by the simulator:
//
//   - (14): if C_p < E_p then a quorum of the epoch grants to p.
//   - (16): a granter's F_q never decreases, except by a release or
//     revocation from the grantee itself, which first gave up its lease.
//   - A granter grants to one process at a time: A_q changes only when
//     C_q ≥ F_q, or to ⊥ when the grantee itself asks to wedge.
//   - An edict is stamped only while C_p < E_p (eq. 2), and stamps of one
//     process strictly increase.
package elect
