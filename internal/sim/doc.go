// Package sim is the deterministic simulator that drives the pure protocol
// cores (elect, and later log) with virtual real time and checks the Nerio
// paper's properties against ground truth at every event.
//
// Everything in a run comes from one seed: clock rates, message delays,
// losses, duplications, partitions, crashes and restarts, detector
// mistakes. A failing seed replays exactly (the test prints the command).
//
// The model (Nerio §1–3):
//
//   - Real time is virtual, in nanoseconds, and strictly increases from one
//     event to the next: events due at the same instant are run a
//     microsecond apart, so every reading a process takes is distinct.
//   - Each process has a physical clock whose rate wanders inside [1−ρ,
//     1+ρ] (eq. 15), or outside it in negative controls. The clock keeps
//     running while the process is down, as the paper assumes; a restart
//     bumps the incarnation. Log scenarios may also reboot the host (the
//     reading restarts near zero; only the incarnation keeps readings
//     increasing) and suspend it (the clock stops while real time runs,
//     and clock.Suspended reports it, as edict.Clock does).
//   - A crashed process keeps its variables (the paper's assumption), so
//     ground truth still counts its grants and its lease until they expire.
//     After a restart, the old incarnation's grant still counts until it
//     expires, because the restart quarantine makes the process behave as
//     if it remembered it; a process that skipped quarantine (a negative
//     control) is judged by what it actually does. Some scenarios stop
//     processes cleanly instead (CleanStops): the process retires, goes
//     down once its grants have lapsed, and its next life, which skips the
//     quarantine, has no grant of the old one to forget.
//   - The network loses, delays, duplicates and reorders messages and can
//     partition, until GST; after GST every message arrives within d/2 and
//     the failure detector is accurate (the premises of eqs. 4 and 5).
//
// The log runs (RunLog) run edictlog.Node's own runtime: each process starts
// with replog.Recover from storage's in-memory stores, which outlive its
// crashes, and its Core is driven by a replog.Driver whose Env is the
// simulated network, stores and state machine (logproc.go): kvfsm's KV,
// or any StateMachine a scenario brings (LogScenario.State, state.go),
// and with DiskState one that keeps its own state (fsm.DiskFSM), durable
// as of its last sync and lost beyond it in a crash, which starts through
// replog.RecoverDiskFSM and is snapshotted through replog.SyncState, and which
// stages the snapshots it is sent (replog.StageSnapshot; fsm.StagingFSM) on
// the processes of odd id and restores them from the snapshot store on
// the others (plainState); that
// machine's store may be the scenario's own (LogScenario.StateDisk), which
// models its durability itself (what it committed survives a crash). A
// scenario may also bring a Model (model.go): a workload of the machine's
// own commands and reads, mixed with the register operations, and a
// checker of the machine's history against what is committed, shown every
// apply, start, restore and read. After
// every call into a process, they check against ground truth (logcheck.go): every
// index a process reports committed holds the one committed entry and is
// durable on a majority of its epoch; acceptedReign and the active epoch
// never go back at a process, restarts included; at most one running
// process believes it holds a lease. Porcupine checks the
// clients' history at the end. TestMutations (-tags edictmutate) switches
// the protocol's rules off one at a time to show these checks can fail.
//
// The protocol runs (ProtocolRun, protocols.go) run weak leader elections
// — elect.Protocol instances, the papers' algorithms of elect/bully,
// elect/stoller, elect/omega and elect/fetzer — on their own, on the same
// world, clocks, timers and network: directed links that can be cut or
// made slow, loss, a GST, and a perfect failure detector if asked. Each
// paper's checks, scenarios and claims are in a package of its own
// (bullysim, stollersim, omegasim, fetzersim), and their Claims make the
// tables of docs/detectors.md (elect's TestPaperClaims).
package sim
