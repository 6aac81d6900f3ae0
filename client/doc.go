// Package client sends writes and reads to an edictlog cluster over a set
// of endpoints, one per member, and does the routing every embedder would
// otherwise write again: it follows the leader a refusal names, waits out
// elections with back-off within the caller's context, and retries only
// what is safe to retry.
//
// An Endpoint is a member as the client reaches it: a *edictlog.Node in the
// same process satisfies it directly, and an embedder's own RPC stub does
// the same for a remote one. The client depends on nothing but the
// library.
//
// What it promises:
//
//   - A write is sent again only when its last attempt was refused before
//     anything was written: a *edictlog.NotLeaderError, edictlog.ErrShutdown on its
//     own (a stopped member took nothing), edictlog.ErrNotCommitted (the write
//     was replaced before it committed and never takes effect), or an
//     error wrapping ErrNotSent (the endpoint's transport did not deliver
//     the call). A write whose outcome is unknown (edictlog.ErrOutcomeUnknown),
//     or that failed any other way once sent, is returned as it is and
//     never sent again, so a write the client acknowledges was applied
//     once, and one it fails was applied at most once.
//   - A refusal that names a leader among the endpoints is followed at
//     once; one that names none moves to the next endpoint, and once every
//     endpoint has refused in a row the client waits (exponential back-off
//     with jitter, Config.MinBackoff to Config.MaxBackoff) before the next
//     round, so an election costs it no busy loop. A *edictlog.Node endpoint
//     itself waits for a leader within the attempt's context (edictlog.Node.Apply),
//     so most elections are waited out there.
//   - Everything happens within the caller's context: when it ends the
//     client returns the last refusal joined with the context's error —
//     still a *edictlog.NotLeaderError to errors.As, since nothing was written.
//   - Reads are retried on the same refusals (a read writes nothing, but
//     the state machine's own error, a *edictlog.QueryError, is an answer and
//     is returned). A lease read goes to the leader; follower and stale
//     reads go to any endpoint, spread over them in turn.
package client
