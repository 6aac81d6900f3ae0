// Package kvfsm provides [KV], a key-value state machine modelled on etcd v3
// (puts, range deletes, ranges and transactions with compares) that
// implements the interfaces of package fsm. It serves the log's tests, the
// simulator and the edictkv server.
//
// Entries with empty Data are the log's own; KV counts them: its revision
// is the index of the last applied entry, whatever it held.
//
// KV guarantees: a malformed command is an error value that changes nothing
// but the revision; a transaction is atomic; reads (Get, Range, Query) may
// run concurrently with Apply and see the state between two entries, never
// inside one; a snapshot reflects exactly the state when Snapshot was called
// although it is written while Applies continue; and Restore either replaces
// the whole state or, on any error, keeps the old one. Keys under
// [SystemPrefix] are a server's own: a range leaves them out unless it asks
// for them.
//
// Encodings (commands, queries, results, snapshots) start with a version
// byte and use msgpack (github.com/hashicorp/go-msgpack/v2). Decoders refuse
// unknown versions, unknown fields and trailing bytes, and bound every size
// ([MaxCommandSize], [MaxKeySize], [MaxQuerySize], [MaxResultSize]).
package kvfsm
