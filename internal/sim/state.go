package sim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// StateMachine is the state machine a log run replicates, with what the
// simulator's clients ask of it: register operations on string keys —
// puts, compare-and-sets, reads — in the machine's own commands, whose
// answers the run checks against a register model (porcupine,
// loghistory.go). LogScenario.State makes one for every start of a
// process; the default is kvfsm's KV. A state machine of another module
// (edictkv's) comes in here: it needs only to express the three
// operations.
type StateMachine interface {
	fsm.FSM
	// PutCommand is the command that sets key to value; CASCommand the
	// one that does so only if key holds expect ("": key is missing).
	PutCommand(key, value string) ([]byte, error)
	CASCommand(key, expect, value string) ([]byte, error)
	// Written says whether the write whose Apply answered res took effect
	// (a CAS whose compare failed did not); an error if res is the
	// machine refusing a well-formed command.
	Written(res any) (bool, error)
	// Get reads key's value from the applied state ("": missing).
	Get(key string) (string, error)
}

// DiskStateMachine is a StateMachine that keeps its own state
// (fsm.DiskFSM): what LogScenario.DiskState runs.
type DiskStateMachine interface {
	StateMachine
	fsm.DiskFSM
}

// A StateDisk is the store of a process's state machine that keeps its
// own state (LogScenario.DiskState): it outlives the process's crashes,
// as files do. The default, copyDisk, copies the machine whole at each
// Sync; a scenario's own (LogScenario.StateDisk) models the durability of
// the machine's real store instead, as a database does: what it committed
// survives a crash, nothing else does.
type StateDisk interface {
	// Open starts a life of the process on the store: the state machine
	// as the store holds it (empty at first).
	Open() (DiskStateMachine, error)
	// Crash ends the life open on the store as a crash does: what the
	// machine had not made durable is lost, and nothing more is written.
	Crash()
	// DurableIndex is the index of the last entry whose effects the
	// store holds durably: the live machine's DurableIndex while a life
	// is open, what the last one left after it crashed.
	DurableIndex() uint64
}

// closeState releases a state machine the run is done with (replaced by
// a restore, or lost in a crash), if it holds anything: one that keeps
// files implements io.Closer.
func closeState(st StateMachine) {
	if c, ok := st.(io.Closer); ok {
		_ = c.Close()
	}
}

// kvState is the default StateMachine: kvfsm's KV.
type kvState struct{ *kvfsm.KV }

func newKVState() StateMachine { return kvState{kvfsm.NewKV()} }

func (kvState) PutCommand(key, value string) ([]byte, error) {
	return kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: value}})
}

func (kvState) CASCommand(key, expect, value string) ([]byte, error) {
	return kvfsm.EncodeCommand(kvfsm.CASValue(key, expect, value))
}

func (kvState) Written(res any) (bool, error) {
	switch r := res.(type) {
	case *kvfsm.Result:
		if r.Txn != nil {
			return r.Txn.Succeeded, nil
		}
		return true, nil
	case error:
		return false, r
	}
	return false, fmt.Errorf("kvfsm answered a write with %T", res)
}

func (s kvState) Get(key string) (string, error) {
	kv, _ := s.KV.Get(key)
	return kv.Value, nil
}

// stateStore is the simulated disk of a state machine that keeps its own
// state: what its last Sync (or Restore) made durable. It survives the
// process's crashes; what was applied after it does not.
type stateStore struct {
	data  []byte // a diskState snapshot: the index, then the machine's own
	index uint64
	// staged is a snapshot Stage kept, at stagedIndex (nil: none).
	staged      []byte
	stagedIndex uint64
}

// copyDisk is the default StateDisk: a stateStore, which diskState syncs
// by copying the whole machine.
type copyDisk struct {
	store    stateStore
	newState func() StateMachine
	live     *diskState
}

func (c *copyDisk) Open() (DiskStateMachine, error) {
	d, err := openDiskState(&c.store, c.newState)
	if err != nil {
		return nil, err
	}
	c.live = d
	return d, nil
}

// Crash drops the live machine: the store keeps only what its last Sync
// (or Restore) copied.
func (c *copyDisk) Crash() {
	if c.live != nil {
		closeState(c.live)
		c.live = nil
	}
}

func (c *copyDisk) DurableIndex() uint64 { return c.store.index }

// userState is the scenario's own machine inside st: the live inner one
// of a diskState, st itself otherwise. A Model sees this one.
func userState(st StateMachine) StateMachine {
	if p, ok := st.(plainState); ok {
		st = p.DiskStateMachine
	}
	if d, ok := st.(*diskState); ok {
		return d.StateMachine
	}
	return st
}

// plainState is a DiskStateMachine as a plain fsm.DiskFSM: it stages
// nothing (fsm.StagingFSM) and its snapshots do not tell their size
// (fsm.SizedSnapshot), so that it is sent snapshots through the snapshot
// store and Restore, and its state is copied into the snapshot store for
// a peer. The processes of even id run their machine so (plainDisk), the
// others as it is: every run has both kinds, and each sending to the
// other.
type plainState struct{ DiskStateMachine }

func (p plainState) Snapshot() (fsm.Snapshot, error) {
	s, err := p.DiskStateMachine.Snapshot()
	if err != nil {
		return nil, err
	}
	return struct{ fsm.Snapshot }{s}, nil
}

// plainDisk reports whether process p runs its machine as a plainState.
func plainDisk(p edict.ProcessID) bool { return p%2 == 0 }

// diskState is a StateMachine that keeps its own state (fsm.DiskFSM) in
// a stateStore: the LogScenario.DiskState variant of any StateMachine. Its
// live state is the inner machine, in memory; Sync copies it whole (the
// inner Snapshot and Persist) into the store; a start opens the store's
// copy. Its snapshots are the inner machine's, after the index they end
// at (8 bytes, big-endian), so that Restore knows it.
type diskState struct {
	StateMachine // the live state
	newState     func() StateMachine
	store        *stateStore
	applied      uint64
}

var (
	_ DiskStateMachine = (*diskState)(nil)
	_ fsm.StagingFSM   = (*diskState)(nil)
)

// openDiskState opens the state machine kept in store, empty if the store
// is.
func openDiskState(store *stateStore, newState func() StateMachine) (*diskState, error) {
	d := &diskState{StateMachine: newState(), newState: newState, store: store}
	if store.data == nil {
		return d, nil
	}
	live, index, err := d.decode(bytes.NewReader(store.data))
	closeState(d.StateMachine)
	if err != nil {
		return nil, fmt.Errorf("sim: open the state machine's store: %w", err)
	}
	if index != store.index {
		return nil, fmt.Errorf("sim: the state machine's store holds index %d, recorded as %d", index, store.index)
	}
	d.StateMachine, d.applied = live, index
	return d, nil
}

func (d *diskState) Apply(e fsm.Entry) any {
	res := d.StateMachine.Apply(e)
	d.applied = e.Index
	return res
}

func (d *diskState) DurableIndex() (uint64, error) { return d.store.index, nil }

func (d *diskState) Sync() (uint64, error) {
	if d.applied == d.store.index && d.store.data != nil {
		return d.applied, nil
	}
	s, err := d.Snapshot()
	if err != nil {
		return 0, err
	}
	defer s.Release()
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		return 0, err
	}
	d.store.data, d.store.index = buf.Bytes(), d.applied
	return d.applied, nil
}

// Snapshot encodes the inner machine's snapshot after the index it ends
// at, at once: its Persist writes those bytes, whose length it knows
// (fsm.SizedSnapshot).
func (d *diskState) Snapshot() (fsm.Snapshot, error) {
	s, err := d.StateMachine.Snapshot()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.BigEndian, d.applied); err != nil {
		return nil, err
	}
	if err := s.Persist(&buf); err != nil {
		return nil, err
	}
	return encodedSnapshot(buf.Bytes()), nil
}

// encodedSnapshot is a snapshot's bytes.
type encodedSnapshot []byte

func (s encodedSnapshot) Persist(w io.Writer) error {
	_, err := w.Write(s)
	return err
}

func (s encodedSnapshot) Size() int64 { return int64(len(s)) }

func (encodedSnapshot) Release() {}

// Restore replaces the live state and the store at once: the whole
// stream is decoded into a new inner machine first, and nothing changes
// if that fails.
func (d *diskState) Restore(r io.Reader) error {
	var buf bytes.Buffer
	live, index, err := d.decode(io.TeeReader(r, &buf))
	if err != nil {
		return err
	}
	d.store.data, d.store.index = buf.Bytes(), index
	closeState(d.StateMachine)
	d.StateMachine, d.applied = live, index
	return nil
}

// Stage decodes the whole stream, as Restore does, and keeps it in the
// store beside the state, which it leaves alone: durable at once, as the
// store's writes are.
func (d *diskState) Stage(index uint64, r io.Reader) error {
	d.store.staged, d.store.stagedIndex = nil, 0
	var buf bytes.Buffer
	live, at, err := d.decode(io.TeeReader(r, &buf))
	if err != nil {
		return err
	}
	closeState(live)
	if at != index {
		return fmt.Errorf("sim: the snapshot staged at %d carries index %d", index, at)
	}
	d.store.staged, d.store.stagedIndex = buf.Bytes(), index
	return nil
}

// InstallStaged makes what Stage kept the state, in memory and in the
// store at once.
func (d *diskState) InstallStaged(index uint64) error {
	if d.store.staged == nil || d.store.stagedIndex != index {
		return fmt.Errorf("sim: nothing is staged at %d", index)
	}
	live, at, err := d.decode(bytes.NewReader(d.store.staged))
	if err != nil {
		return err
	}
	*d.store = stateStore{data: d.store.staged, index: at}
	closeState(d.StateMachine)
	d.StateMachine, d.applied = live, at
	return nil
}

// DiscardStaged drops what Stage kept.
func (d *diskState) DiscardStaged() error {
	d.store.staged, d.store.stagedIndex = nil, 0
	return nil
}

func (d *diskState) decode(r io.Reader) (StateMachine, uint64, error) {
	var index uint64
	if err := binary.Read(r, binary.BigEndian, &index); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("sim: state snapshot: index: %w", err)
	}
	live := d.newState()
	if err := live.Restore(r); err != nil {
		closeState(live)
		return nil, 0, fmt.Errorf("sim: state snapshot at %d: %w", index, err)
	}
	return live, index, nil
}
