// Package edictlogtest is a test kit for programs that embed edictlog's
// replicated log, in the spirit of net/http/httptest: it runs Nodes of
// package edictlog in one test process, with no TCP, and checks a state
// machine against the contract of package fsm.
//
//   - [Network] and [Transport]: an in-memory edictlog.Transport. Any number
//     of transports attach to one Network by address; the Network
//     injects faults per directed link between two processes: cuts
//     ([Network.Cut], [Network.Partition], [Network.Isolate]), loss
//     ([Network.Drop]) and delay ([Network.Delay]), lifted by
//     [Network.Heal]. Snapshot streams go over the same links.
//   - [Cluster]: n Nodes bootstrapping one cluster over a Network, each
//     with its own store (storage.MemStore, or a WALStore or BoltStore in
//     a temporary directory with ClusterConfig.WAL or Bolt), snapshot
//     store and the
//     embedder's state machine, with Kill, Restart (and RestartAt, at a
//     new address), Stop, Join, Partition, Heal, WaitLeader, Leader,
//     Apply through the leader, Read at any level, and WaitApplied.
//     [NewCluster] ties it to a test; [StartCluster] runs one anywhere
//     else (an Example).
//   - [CheckFSM]: the conformance check of an embedder's fsm.FSM:
//     determinism across replicas, the Snapshot→Restore round trip,
//     Persist after later applies, Restore reading its stream to the end
//     and keeping its state when the stream fails.
//
// # What the transport guarantees
//
// What edictlog.Transport promises, and what package transport's TCP does
// beyond it where a Node can tell the difference:
//
//   - A message is delivered whole or not at all, to the process it is
//     addressed to, from the process that sent it, and never altered: the
//     receiver gets a deep copy, so the sender may reuse its payload once
//     Send returns. Send validates what it sends (wire.Message.Validate).
//   - Delivery is best effort: a fault, a closed receiver, an address no
//     one holds, or a full queue loses messages. Messages of one lane
//     between two processes — control messages, or bulk ones (Append,
//     FetchReply) — arrive in the order sent, as on one TCP connection,
//     whatever the delays; the two lanes are not ordered with each other.
//   - Queues are bounded as TCP's are (NetworkConfig): a control queue
//     per peer, a window of bulk messages in flight per peer, an inbox;
//     Send waits for room until its context ends, and takes the room
//     there is even with a context already done, which is how the Node
//     sends without blocking. Control messages are handed to the runtime
//     before queued bulk ones.
//   - A transport announces where it listens, with its incarnation, to
//     the peers it knows when asked (Announce) and on every new lane, as
//     TCP's hello does on every connection; a receiver hears no
//     incarnation below one it heard from the same process.
//   - A snapshot stream reaches the receiver only through Snapshots, is
//     read as it is sent (nothing holds the whole snapshot), ends in
//     io.EOF only after exactly the declared size, and otherwise in an
//     error; the sender learns the receiver's outcome.
//
// What it does not model: encoding and framing (no frame size limit, no
// handshake, cluster id or TLS), bandwidth, and a partition that heals
// with messages still buffered in the kernel (messages in flight when a
// link is cut are lost, as when a connection breaks).
//
// # What the cluster models
//
// The Nodes run the production runtime, unchanged, on real time: their
// clocks are the system's (edict.SystemClock), their timers are real,
// and the kit's timings (RoundTrip, RenewInterval, MaxLease) are short
// so that a failover takes about a second. No check in the kit depends on
// timing; every wait takes a context, and a test should give it a
// generous deadline, since a busy machine delays elections but never
// breaks them. The kit does not fake time; a Node's Config.WrapClock
// (through ClusterConfig.Tune) can.
//
// Kill is a crash of the process: it stops sending at once (no lease
// release, no hand-over), loses what it had queued and in flight, and
// loses the writes its Node had not yet handed to its store. It keeps
// what the store had taken, as the operating system keeps a killed
// process's writes: a MemStore keeps it all, a bbolt file every committed
// transaction. A power failure, which also loses writes not yet synced
// to the disk, is not modelled (package storage's own tests inject
// those), nor is a disk that lies about fsync.
package edictlogtest
