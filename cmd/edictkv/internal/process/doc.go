// Package process starts one edictkv process from a data directory
// (Process): it opens there the replicated state's bbolt file (state.db,
// internal/kvstate on internal/mvcc), the log's bbolt store (edictkv.db)
// and the snapshot folder, binds the log's transport and the API
// listeners, builds the weak leader election (the Node's default,
// gossip's memberlist detector, or one of the papers' algorithms), starts
// an edictlog.Node with the state as its FSM (an fsm.DiskFSM: it starts where
// its file left it), and wires over them what both APIs share — one leader router
// with its handover gate (internal/route), the member directory
// (internal/directory), the KV service (internal/kvservice, with the
// space quota over the state's file) and the metrics registry, and, if
// asked, auto-compaction (internal/compactor) — then serves the HTTP API
// (internal/httpapi) and, if asked, etcd's gRPC API (internal/etcdapi),
// two adapters over them. The etcd API's listener is one port as etcd's
// client URL is (clientport.go): gRPC for connections that open with
// HTTP/2's preface, etcd's JSON gateway, /health, /livez, /readyz,
// /version and /metrics (internal/etcdhttp) for the others.
//
// What a Process guarantees:
//
//   - A data directory written before the state had a file of its own
//     (the log's store without state.db) is refused with ErrOldFormat,
//     naming it; nothing in it is changed.
//   - Every address is known before any process starts: Listen opens the
//     data directory and binds every listener, Start then starts the Node
//     and serves. The peers given to Start are the bootstrap epoch, read
//     on the first start only (later the membership comes from the store);
//     their API addresses are used on every start.
//   - With the etcd API on, the process records its HTTP and gRPC
//     addresses in the member directory (through whichever process leads)
//     until they are there, so that the others can forward to it and list
//     it.
//   - It follows the Node by its events (edictlog.Node.Observe), never by
//     polling Status: the gossip detector's epoch and members, the count
//     of reigns, and the compactor's leadership.
//   - The compactor proposes only at the leader, under the router's
//     handover gate: a compaction that finds this process no longer
//     leading is refused, never forwarded, and the next leader's
//     compactor carries on.
//   - Shutdown marks both APIs not ready, hands leadership to the most
//     up-to-date other member through the router's handover gate (the
//     calls being served as leader finish first) before it stops serving,
//     finishes the requests in flight, stops the Node
//     (which releases any lease it still holds), and only then leaves
//     gossip, so that the others never count it dead while it might lead.
//
// Its metrics — the Node's state, the reigns it started and the changes
// of leader it saw, its lease statistics (renewals, late renewals, leases
// lost by cause, the age of each peer's last grant) and storage statistics
// (the unsynced backlog, slow writes, shed appends, throttled proposals),
// the store's append and fsync times, the commit latency of writes — live
// in the process's registry beside the HTTP and etcd APIs' request
// metrics and the process collector's process_*, all served on the HTTP
// API's /metrics and the etcd port's. Statistics the Node
// keeps are read from it at scrape time, never polled.
//
// Built with the tag jepsen, a process also carries the Jepsen harness's
// fault hooks (faults_jepsen.go): it wraps its transport, clock and store
// so that the harness can partition it, delay its messages, skew its clock
// and slow its disk's durable batches through /debug/jepsen/faults. A
// production build has none of it.
package process
