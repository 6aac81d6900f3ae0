// Package simstate runs edictkv's replicated state (kvstate over the
// MVCC store) under the deterministic simulator (internal/sim): the
// production log, its crashes, partitions, snapshots and schedules, with
// the state's store modelled as it is durable — a backend.Memory whose
// committed batches survive a crash and nothing else (Disk) — and a
// workload of etcd requests checked against a model built from the
// committed log (Model, Checker).
//
// What a run guarantees when it passes, beyond the simulator's own checks
// of the log (one entry per committed index, durable on a quorum; lease
// holders; porcupine on the register operations):
//
//   - every replica's history — at every revision it keeps, every key
//     alive with its value, create_revision, mod_revision, version and
//     lease — is the one the committed log makes under etcd's rules, at
//     every apply (the revision it made), at every start after a crash
//     (what the store kept), after every snapshot installed, and at the
//     end, where the running replicas are also compared with each other;
//   - every entry's answer (revision, refusal, response, stamps) is the
//     same on every replica and the model's, and reaches its proposer;
//   - reads at any level, at the current revision or a past one, answer
//     what the model holds at the entries the serving replica applied:
//     the keys as they were at any revision from the compaction on,
//     ErrCompacted below it and ErrFutureRev above the replica's own.
//
// Scenario makes any log scenario of the simulator such a run. The tests
// run every log scenario and the crash-point explorer's:
//
//	go test ./cmd/edictkv/internal/simstate/ -count=1                # 5 seeds each
//	EDICT_SIM_SEEDS=500 go test ./cmd/edictkv/internal/simstate/ -run 'TestLog$' -count=1 -timeout 0
package simstate

import (
	"math/rand/v2"

	"github.com/edictlog/edictlog/internal/sim"
)

// Scenario is sc run with edictkv's state: each process's state keeps
// its own store (DiskState, a Disk), whose batch sizes are drawn from
// the seed, and the Checker's workload and model. A seed of Scenario(sc,
// seed) replays exactly.
func Scenario(sc sim.LogScenario, seed uint64) sim.LogScenario {
	rng := rand.New(rand.NewPCG(seed, 0x6564696374)) // "edict"
	batch, step := 1+rng.IntN(64), 1+rng.IntN(8)
	sc.DiskState = true
	sc.StateDisk = func() sim.StateDisk { return NewDisk(storeOptions(batch, step)) }
	sc.Model = func() sim.Model { return NewChecker() }
	return sc
}
