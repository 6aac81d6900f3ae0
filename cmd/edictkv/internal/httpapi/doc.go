// Package httpapi is edictkv's HTTP+JSON API (Server) over a replicated
// log.Node running the kvfsm.KV state machine: the key-value and cluster
// endpoints, leader forwarding, health, and the metrics of the requests it
// serves. It serves a Node it is given; internal/process starts the Node,
// this Server and the etcd API (internal/etcdapi) for one edictkv process.
//
// A request that needs the leader — a write, or a lease read — is served
// here if this process leads; otherwise it is forwarded to the leader's HTTP
// address (or, with ?redirect, answered 307), and while no leader is known
// the server waits up to Config.LeaderWait for one before answering 503
// with Retry-After. A forwarded request carries X-Edictkv-Forwarded-By; a
// process that receives one but does not lead answers 421 so that the
// forwarder looks again, rather than forwarding a second time: a request
// makes at most one hop, so stale leader hints cannot make it loop. The
// decision is internal/route's, which the etcd API (internal/etcdapi)
// shares: it waits on the Node's events (log.Node.Observe), never by
// polling Status.
//
// The leader's HTTP address is found in two places: the addresses this
// process was started with (Config.HTTPAddrs: the --peers flag of edictkv
// serve), and a registry kept in the replicated state machine itself under
// keys that the API refuses (they start with a NUL byte), written when a
// learner is added and when a process publishes its own addresses (POST
// /v1/cluster/addresses). The registry is what lets every process find a
// node that joined after it started.
//
// Every error answer is an ErrorJSON, whose Code is a stable string to
// switch on; bad input is refused with a 4xx before anything reaches the
// log, so it changes nothing.
package httpapi
