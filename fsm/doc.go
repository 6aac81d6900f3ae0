// Package fsm defines the state machines an edictlog replicated log drives:
// [FSM], [BatchFSM], [Snapshot] and [Querier], declared where the log
// consumes them. The etcd-shaped key-value state machine that edictkv, the
// simulator and the log's tests use is package [kvfsm] (fsm/kvfsm).
//
// What the log guarantees an FSM, and what it asks in return:
//
//   - Apply is called from one goroutine, in log index order — which is edict
//     order (DESIGN §6) — exactly once per committed entry. After Restore the
//     log applies only the entries after the snapshot's index.
//   - Apply must be deterministic: the new state and the response are a
//     function of the previous state and the entry alone. No clock, no
//     randomness, no map iteration order, no environment may leak into
//     either, or replicas diverge. A command the FSM refuses is still
//     committed; the refusal is returned as a value and must be the same on
//     every replica.
//   - Entries with empty Data are the log's own (a reign-start edict, an
//     epoch configuration); an FSM treats them as no-ops.
//
// [kvfsm]: https://pkg.go.dev/github.com/edictlog/edictlog/fsm/kvfsm
package fsm
