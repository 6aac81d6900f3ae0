package simstate

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/sim"
)

// Machine is edictkv's replicated state (kvstate.State) as the
// simulator's state machine: the register operations of its clients are
// etcd requests — a put is a Put, a compare-and-set a Txn comparing the
// value — and each Apply is followed by one step of the physical
// compaction pending and one of the watchers' work (a catch-up step,
// parked responses offered again), which a server's background loops
// would run, so that compactions are interrupted by writes, syncs and
// crashes, and watchers catch up between writes.
type Machine struct {
	*kvstate.State
}

var _ sim.DiskStateMachine = Machine{}

// Apply applies e, then takes one step of the pending compaction and
// one of the watchers'. A step that fails is the store failing: the run
// stops there (the simulator reports a panic as its seed's violation).
func (m Machine) Apply(e fsm.Entry) any {
	res := m.State.Apply(e)
	if _, err := m.State.CompactStep(); err != nil {
		panic(fmt.Sprintf("simstate: compaction step after entry %d: %v", e.Index, err))
	}
	if _, err := m.State.Store().WatchStep(); err != nil {
		panic(fmt.Sprintf("simstate: watch step after entry %d: %v", e.Index, err))
	}
	return res
}

// PutCommand is a Put of key.
func (Machine) PutCommand(key, value string) ([]byte, error) {
	return (&kvstate.Request{Put: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}).Encode()
}

// CASCommand is a Txn that puts key if its value is expect (a value
// compare on a missing key fails, so expect "" never matches).
func (Machine) CASCommand(key, expect, value string) ([]byte, error) {
	return (&kvstate.Request{Txn: &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte(key), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_Value{Value: []byte(expect)}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}}},
	}}).Encode()
}

// Written reads a register write's answer: a Txn took effect if it
// succeeded; a refusal of a register command is the machine failing.
func (Machine) Written(res any) (bool, error) {
	r, ok := res.(*kvstate.Result)
	if !ok {
		return false, fmt.Errorf("kvstate answered a write with %T", res)
	}
	switch {
	case r.Err != nil:
		return false, r.Err
	case r.Txn != nil:
		return r.Txn.Succeeded, nil
	case r.Put != nil:
		return true, nil
	}
	return false, fmt.Errorf("kvstate answered a register write at %d with no response", r.Index)
}

// Get reads key at the current revision.
func (m Machine) Get(key string) (string, error) {
	resp, _, err := m.State.Range(context.Background(), &pb.RangeRequest{Key: []byte(key)})
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Disk is a process's store of its state: a backend.Memory, whose
// committed state is what survives a crash (backend.Memory.Crash) and
// whose uncommitted changes do not, as a bbolt file's. It is the
// simulator's StateDisk for Machine.
type Disk struct {
	opts    kvstate.Options
	mem     *backend.Memory
	live    *kvstate.State
	durable uint64 // what the last life left durable
}

var _ sim.StateDisk = (*Disk)(nil)

// NewDisk returns an empty store whose states open with opts (without
// Options.Store.Background: the simulator drives commits and compaction).
func NewDisk(opts kvstate.Options) *Disk {
	opts.Store.Background = false
	return &Disk{opts: opts, mem: backend.NewMemory()}
}

// Open opens the state the store holds.
func (d *Disk) Open() (sim.DiskStateMachine, error) {
	if d.live != nil {
		return nil, fmt.Errorf("simstate: a state is open on the store already")
	}
	st, err := kvstate.Open(d.mem, d.opts)
	if err != nil {
		return nil, err
	}
	d.live = st
	return Machine{st}, nil
}

// Crash ends the open state's life: the backend keeps what it committed,
// and the old state, left unclosed, can write nothing more to it.
func (d *Disk) Crash() {
	if d.live == nil {
		return
	}
	d.durable = d.live.Store().DurableIndex()
	d.mem = d.mem.Crash()
	d.live = nil
}

// DurableIndex is the index the store holds durably.
func (d *Disk) DurableIndex() uint64 {
	if d.live != nil {
		return d.live.Store().DurableIndex()
	}
	return d.durable
}

// storeOptions are the MVCC store's options for a run: small batches, so
// that the store commits by itself between the simulator's syncs and a
// crash finds it anywhere, small compaction steps, so that a compaction
// spans several entries, and small watch channels and catch-up steps, so
// that slow clients' responses park and watchers catch up over several
// steps.
func storeOptions(batchLimit, compactionBatch, watchBuffer, watchBatch int) kvstate.Options {
	return kvstate.Options{Store: mvcc.Options{BatchLimit: batchLimit, CompactionBatchLimit: compactionBatch,
		WatchBuffer: watchBuffer, WatchBatchLimit: watchBatch}}
}
