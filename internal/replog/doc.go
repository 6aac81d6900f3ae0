// Package replog is edictlog's replicated log protocol, in two layers:
// Core, deterministic and free of I/O, driven by clock readings and
// messages (docs/protocol.md); and Driver, which carries out the Core's
// Ready with the I/O an Env provides and answers each write and read
// once. Recover brings a process up from its stores in the order safety
// needs. The embedder's package, edictlog, runs a Driver in its Node with
// a real clock, storage, transport and state machine; the simulator
// (internal/sim) runs the same Driver in virtual time, so what the
// simulator checks is what runs.
//
// The log speaks package wire's vocabulary (entries, positions, epoch
// configurations, messages). What it needs of its stores it declares
// (Store, SnapshotStore) with the same methods as edictlog's, which
// documents them; interfaces match by their methods, so one store serves
// both. The package is internal: its exported names are for the Node,
// the simulator and the tests, not an API.
//
// Each safety rule a mutation switches off is named in mutation.go; a
// build with -tags edictmutate lets the mutation runner switch them off
// one at a time.
package replog
