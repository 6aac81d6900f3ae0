// Package simstate runs edictkv's replicated state (kvstate over the
// MVCC store) under the deterministic simulator (internal/sim): the
// production log, its crashes, partitions, snapshots and schedules, with
// the state's store modelled as it is durable — a backend.Memory whose
// committed batches survive a crash and nothing else (Disk) — and a
// workload of etcd requests and of watch clients checked against a model
// built from the committed log (Model, Checker).
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
//     ErrCompacted below it and ErrFutureRev above the replica's own;
//   - watches (watch.go) — of a key, a prefix, a range or every key, from
//     a revision below the compaction, in the past, the current one or
//     the future, with prev_kv and filters now and then, on streams read
//     promptly or slowly enough that responses park and watchers catch
//     up from history — are sent, across snapshot installs and across
//     their clients' reconnects to the same replica or another (after a
//     crash, a client's move, a replica silent too long) from their last
//     revision + 1, exactly the committed history of their keys: every
//     event of [start, the last revision seen] once, in revision order
//     and each revision's in its write's order, with the key's value,
//     create_revision, mod_revision, version and lease and, asked for,
//     the key as the change found it (missing only for an event at the
//     serving replica's compaction revision), the filters respected; a
//     compaction cancels a watch only past its next revision and at most
//     at the replica's compaction; a progress notification answers a
//     request, at the revision the replica had applied then, and comes
//     only once every event of its watches up to it was sent; nothing
//     comes for a watch after its client cancelled it; and at the end,
//     the running replicas' catch-up run out, every watch there has been
//     sent every event up to its replica's revision.
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
// its own store (DiskState, a Disk), whose batch sizes, watch channels
// and catch-up steps are drawn from the seed, and the Checker's workload,
// watch clients and model. A seed of Scenario(sc, seed) replays exactly.
func Scenario(sc sim.LogScenario, seed uint64) sim.LogScenario {
	rng := rand.New(rand.NewPCG(seed, 0x6564696374)) // "edict"
	batch, step := 1+rng.IntN(64), 1+rng.IntN(8)
	buf, wbatch := []int{1, 2, 4, 16, 128}[rng.IntN(5)], []int{1, 3, 8, 1000}[rng.IntN(4)]
	sc.DiskState = true
	sc.StateDisk = func() sim.StateDisk { return NewDisk(storeOptions(batch, step, buf, wbatch)) }
	sc.Model = func() sim.Model { return NewChecker(seed) }
	return sc
}
