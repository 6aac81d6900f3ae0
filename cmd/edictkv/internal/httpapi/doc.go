// Package httpapi is edictkv's HTTP+JSON API (Server): the key-value
// endpoints, the cluster and admin endpoints, health, and the metrics of
// the requests it serves. It is an adapter: the key-value calls are the
// KV service's (internal/kvservice), where they go is the router's
// (internal/route), where the other processes are the member directory's
// (internal/directory). The bodies, headers and error codes it answers
// with are the public contract in cmd/edictkv/kvjson. internal/process
// builds one Server per edictkv process beside the etcd API
// (internal/etcdapi).
//
// A request that needs the leader — a write, a lease read, an admin call —
// is served here if this process leads; otherwise it is forwarded to the
// leader's HTTP address (or, with ?redirect, answered 307), and while no
// leader is known the server waits up to the router's wait for one before
// answering 503 with Retry-After. A forwarded request carries
// X-Edictkv-Forwarded-By; a process that receives one but does not lead
// answers 421 so that the forwarder looks again, rather than forwarding a
// second time: a request makes at most one hop, so stale leader hints
// cannot make it loop.
//
// A watch (GET /v1/watch/<key>, watch.go) is never forwarded: every
// process streams the changes of its own applied state, a revision a
// line, so that a client resumes through any process from the last
// revision it saw + 1 and neither misses nor repeats a change.
//
// Every error answer is a kvjson.ErrorJSON, whose Code is a stable string
// to switch on; bad input is refused with a 4xx before anything reaches
// the log, so it changes nothing. One function (errorOf) turns the KV
// service's errors into statuses and codes.
package httpapi
