// Package route decides where edictkv runs a call that needs the leader —
// a write, a lease read, an admin call — for both of its APIs, the HTTP
// API (internal/httpapi) and etcd's gRPC API (internal/etcdapi), and
// carries it there: a Router says whether to serve a call here or at the
// leader and when to look again; its handover gate lets the calls being
// served as leader finish before leadership moves; HTTPForwarder and
// GRPCForwarder send a call to the leader and bring its answer back.
//
// What a Router guarantees:
//
//   - A call is served here only while the Node's Status says this
//     process leads, and only under the handover gate: a handover
//     (HandOver) first stops new calls from being served here, then waits
//     for those being served to finish, then transfers leadership. Calls
//     that arrive meanwhile wait for the next leader and go there. A
//     write pending when leadership moves would otherwise end with an
//     unknown outcome.
//   - A call another process forwarded here is never forwarded again:
//     unless this process leads, or is beginning a reign, Do refuses it at
//     once (ErrMisdirected), and the forwarder looks again. A call makes
//     one hop at most, so stale leader hints cannot make it loop.
//   - It never polls the Node. While no leader is known, or this process
//     is beginning a reign, it waits for the Node's next leadership event
//     (edictlog.Node.Observe), which the Node sends only once Status shows the
//     change. After an attempt that was refused or could not reach the
//     leader it tries again at the next leadership event or after a short
//     back-off (10ms, doubling up to 100ms), whichever comes first: a
//     refusal such as a transfer that gives up, or a leader whose address
//     is not yet known, ends without an event.
//   - It gives up after the wait it was made with, and then says so with a
//     *edictlog.NotLeaderError (wrapping ErrNoLeader, and the context's error
//     if the caller's context ended) that names the leader it knew of, if
//     any. Serve and forward functions signal "look again" the same way,
//     so one check, errors.As(err, new(*edictlog.NotLeaderError)), tells a
//     call not answered from one answered.
//
// What the forwarders guarantee: a call is marked as forwarded (the
// X-Edictkv-Forwarded-By header, the edictkv-forwarded-by gRPC metadata),
// so that the process it reaches refuses it rather than forwarding it on;
// a call that was certainly not delivered (no address known, no
// connection, a refusal by a process that does not lead), and a read
// whatever befell it, is reported as a *edictlog.NotLeaderError, to be routed
// again; a write whose connection failed after it was sent is reported as
// an error wrapping edictlog.ErrOutcomeUnknown and never sent again, since a
// retried compare-and-swap could fail against its own first attempt.
//
// Calls whose answers are small (Put) go over a stream per leader
// instead (GRPCForwarder.InvokeStreamed, stream.go), in batches, with the
// same outcomes; a stream that breaks fails its calls as a connection
// does, except when the leader drained it (StreamDrained): the calls it
// left unanswered never ran, and are routed again. A leader that serves
// no stream gets the calls one by one.
//
// Forwarding gRPC calls: one generic forwarder for every unary method,
// by its full name over a grpc.ClientConn (GRPCForwarder.Invoke, as the
// generated clients do it), rather than one generated client per etcd
// service. The request and reply messages are the ones the server already
// decoded and will encode, so nothing is translated, and a service added
// later (Lease, Auth, more of Maintenance) forwards its unary calls with
// no code here; per-service clients would need one wrapper per method
// and drift with them. The price is that the caller names the reply's
// type (a new message of it), which the adapters do with a type
// parameter. Streaming calls that need the leader (Lease keep-alives)
// will need a stream proxy over the same connections; Watch does not,
// since every process serves it from its own applied state.
package route
