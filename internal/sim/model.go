package sim

import (
	"math/rand/v2"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// A Model checks a scenario's state machine beyond the register
// operations (LogScenario.Model), for a state machine of another module
// that the simulator knows only as a StateMachine: it brings a workload
// of the machine's own commands and reads, and a model of the machine's
// history built from what is committed. The run calls it from its one
// goroutine; an error it returns is a violation of the run's seed.
//
// What it is shown, in the run's order:
//   - every entry a process's state machine applies, with the machine and
//     its answer (Applied): the entries at each process arrive in index
//     order without gaps, and the run has checked each to be the one
//     entry committed at its index, so the first process to apply an
//     index tells the model the committed entry there, and whoever
//     applies an index later has been told every entry before it;
//   - every start of a process (Started), on the state its stores left
//     (a crash loses what the machine had not made durable), and every
//     snapshot restored from a leader (Restored);
//   - the answers of its workload's commands and reads as they come
//     (ModelOp.Done, ModelOp.Read);
//   - the running processes' state machines at the end (End).
type Model interface {
	// Op is a client's next operation of the workload, drawn from rng
	// (the run's: the same seed draws the same operations).
	Op(rng *rand.Rand) ModelOp
	// Applied: process p's state machine st applied e and answered res.
	// e.Data is the log's memory: copy what is kept.
	Applied(p edict.ProcessID, st StateMachine, e fsm.Entry, res any) error
	// Started: p's state machine st begins a life, holding the effects of
	// the entries up to applied.
	Started(p edict.ProcessID, st StateMachine, applied uint64) error
	// Restored: p's state machine st was replaced by a snapshot's state,
	// whose last entry is at index.
	Restored(p edict.ProcessID, st StateMachine, index uint64) error
	// End: the run is over; up holds each running process's state machine
	// with the index it applied last.
	End(up map[edict.ProcessID]ModelState) error
}

// ModelState is a running process's state machine at the end of a run.
type ModelState struct {
	State   StateMachine
	Applied uint64
}

// ModelOp is one operation of a Model's workload: a command to propose
// (Command set), or a read of the applied state at a read level.
type ModelOp struct {
	Command []byte
	// Done checks the answer of the command, committed at index: what the
	// proposer's state machine answered when it applied it. It is called
	// even if the client gave up waiting.
	Done func(index uint64, res any) error
	// Level is the read's level; Read checks what the process that
	// serves it reads from st, which has applied the entries up to
	// applied.
	Level replog.ReadLevel
	Read  func(st StateMachine, applied uint64) error
}

// newStateDisk makes a process's state machine store (DiskState): the
// scenario's own, or the simulator's copies.
func (r *lrun) newStateDisk() StateDisk {
	if r.sc.StateDisk != nil {
		return r.sc.StateDisk()
	}
	return &copyDisk{newState: r.sc.State}
}

// nextModelOp makes op one of the model's, ModelShare of the time.
func (r *lrun) nextModelOp(op *clientOp) bool {
	if r.model == nil || !r.w.chance(r.sc.ModelShare) {
		return false
	}
	m := r.model.Op(r.w.rng)
	op.in, op.model = regInput{kind: opModel, level: m.Level}, &m
	return true
}

// submitModel hands a model operation to p's Driver: its command
// proposed, or its read started at its level. Neither goes into the
// register history; the model checks their answers.
func (r *lrun) submitModel(p *lproc, d *replog.Driver, op *clientOp) {
	m := op.model
	if m.Command == nil {
		d.Read(m.Level, func(_ replog.ReadResult, err error) {
			if err == nil {
				if err := m.Read(userState(p.state), p.applied); err != nil {
					r.fail("%v: model: a read at %v, applied %d: %v", p.id, m.Level, p.applied, err)
					return
				}
				r.modelOps++
			}
			r.finishOp(op, regOutput{}, true)
		})
		return
	}
	d.Propose(wire.EntryCommand, m.Command, func(res replog.ApplyResult, err error) {
		if err == nil {
			if err := m.Done(res.Index, res.Response); err != nil {
				r.fail("%v: model: the answer to the command committed at %d: %v", p.id, res.Index, err)
				return
			}
			r.modelOps++
			if r.w.now > r.gst {
				r.ackAfterGST++
			}
		}
		r.finishOp(op, regOutput{}, true)
	})
	if !op.done {
		d.Flush()
	}
}

// modelApplied shows the model the entry p applied.
func (r *lrun) modelApplied(p *lproc, e fsm.Entry, res any) bool {
	if r.model == nil {
		return true
	}
	if err := r.model.Applied(p.id, userState(p.state), e, res); err != nil {
		r.fail("%v: model: applying index %d: %v", p.id, e.Index, err)
		return false
	}
	return true
}

// modelStarted shows the model the state p starts a life with.
func (r *lrun) modelStarted(p *lproc) bool {
	if r.model == nil {
		return true
	}
	if err := r.model.Started(p.id, userState(p.state), p.applied); err != nil {
		r.fail("%v: model: at its start (incarnation %d, applied %d): %v", p.id, p.inc, p.applied, err)
		return false
	}
	return true
}

// modelRestored shows the model the state p restored from a snapshot.
func (r *lrun) modelRestored(p *lproc, index uint64) bool {
	if r.model == nil {
		return true
	}
	if err := r.model.Restored(p.id, userState(p.state), index); err != nil {
		r.fail("%v: model: after restoring a snapshot at %d: %v", p.id, index, err)
		return false
	}
	return true
}

// modelEnd shows the model the running processes at the end of the run.
func (r *lrun) modelEnd() {
	if r.model == nil {
		return
	}
	up := map[edict.ProcessID]ModelState{}
	for _, p := range r.upProcs() {
		up[p.id] = ModelState{State: userState(p.state), Applied: p.applied}
	}
	if err := r.model.End(up); err != nil {
		r.fail("model: at the end: %v", err)
	}
}
