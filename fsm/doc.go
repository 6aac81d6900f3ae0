// Package fsm defines the state machines an edictlog replicated log drives
// ([FSM], [BatchFSM], [Snapshot], [Querier]) and provides [KV], a key-value
// state machine modelled on etcd v3 (puts, range deletes, ranges and
// transactions with compares). KV serves the log's tests, the simulator and
// the edictkv server.
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
//     epoch configuration); an FSM treats them as no-ops. KV counts them: its
//     revision is the index of the last applied entry, whatever it held.
//
// KV guarantees in addition: a malformed command is an error value that
// changes nothing but the revision; a transaction is atomic; reads (Get,
// Range, Query) may run concurrently with Apply and see the state between
// two entries, never inside one; a snapshot reflects exactly the state when
// Snapshot was called although it is written while Applies continue; and
// Restore either replaces the whole state or, on any error, keeps the old
// one.
//
// Encodings (commands, queries, results, snapshots) start with a version
// byte and use msgpack (github.com/hashicorp/go-msgpack/v2). Decoders refuse
// unknown versions, unknown fields and trailing bytes, and bound every size
// ([MaxCommandSize], [MaxKeySize], [MaxQuerySize], [MaxResultSize]).
package fsm
