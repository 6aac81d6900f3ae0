package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// runClient issues one operation at a time until the end of the run.
func (r *lrun) runClient(id int) {
	seq := 0
	lastSeen := map[string]string{}
	var next func()
	next = func() {
		if r.w.now >= r.end-int64(time.Second) || r.violation != "" {
			return
		}
		ups := r.upProcs()
		if len(ups) == 0 {
			r.w.after(10*time.Millisecond, next)
			return
		}
		p := ups[r.w.rng.IntN(len(ups))]
		if l := r.leader(); l != nil && r.w.chance(0.5) {
			p = l // clients usually find the leader (§10.4)
		}
		op := &clientOp{client: id, call: r.w.now, proc: p.id}
		key := ""
		if !r.nextModelOp(op) {
			key = fmt.Sprintf("k%d", r.w.rng.IntN(r.sc.Keys))
			switch x := r.w.rng.IntN(10); {
			case x < 5:
				op.in = regInput{kind: opGet, key: key, level: r.sc.Levels[r.w.rng.IntN(len(r.sc.Levels))]}
			case x < 8:
				seq++
				op.in = regInput{kind: opPut, key: key, value: fmt.Sprintf("c%d-%d", id, seq)}
			default:
				seq++
				op.in = regInput{kind: opCAS, key: key, value: fmt.Sprintf("c%d-%d", id, seq), expect: lastSeen[key]}
			}
		}
		done := make(chan struct{})
		op.onDone = func(out regOutput) {
			if op.in.kind == opGet {
				lastSeen[key] = out.value
			}
			close(done)
		}
		r.submit(p, op)
		// The client waits for the answer, or gives up after a second.
		var wait func()
		started := r.w.now
		wait = func() {
			select {
			case <-done:
				r.w.after(r.w.between(time.Millisecond, 20*time.Millisecond), next)
				return
			default:
			}
			if r.w.now-started >= int64(time.Second) {
				r.timeout(op)
				r.w.after(r.w.between(time.Millisecond, 20*time.Millisecond), next)
				return
			}
			r.w.after(2*time.Millisecond, wait)
		}
		r.w.after(time.Millisecond, wait)
	}
	r.w.after(r.w.between(0, 50*time.Millisecond), next)
}

// submit hands op to p's Driver, as edictkv hands a request to its
// edictlog.Node: a write is proposed, a read started at its level; the Driver
// answers each once.
func (r *lrun) submit(p *lproc, op *clientOp) {
	r.call(p, func(d *replog.Driver) {
		if op.model != nil {
			r.submitModel(p, d, op)
			return
		}
		if op.in.kind == opGet {
			d.Read(op.in.level, func(res replog.ReadResult, err error) {
				if err != nil {
					r.finishOp(op, regOutput{}, true) // not served: no answer to check
					return
				}
				v, err := p.state.Get(op.in.key)
				if err != nil {
					r.fail("%v: read %q from the state machine: %v", p.id, op.in.key, err)
					return
				}
				r.finishOp(op, regOutput{value: v}, false)
			})
			return
		}
		var data []byte
		var err error
		if op.in.kind == opPut {
			data, err = p.state.PutCommand(op.in.key, op.in.value)
		} else {
			data, err = p.state.CASCommand(op.in.key, op.in.expect, op.in.value)
		}
		if err != nil {
			r.fail("encode command: %v", err)
			return
		}
		appended := false
		d.Propose(wire.EntryCommand, data, func(res replog.ApplyResult, err error) {
			switch {
			case err == nil:
				r.completeWrite(p, op, res.Response)
			case errors.Is(err, replog.ErrOutcomeUnknown):
				r.unknownOp(op)
			case !appended, errors.Is(err, replog.ErrNotCommitted):
				// Refused, or another edict committed at its index:
				// certainly no effect, and the history says so, so a
				// write reported lost that did take effect is caught.
				r.finishOp(op, regOutput{}, true)
			default:
				r.fail("write %v answered with an error that is neither unknown nor definite: %v", op, err)
			}
		})
		if !op.done {
			appended = true
			r.hist.invokeWrite(op)
			d.Flush()
		}
	})
}

// timeout: a write may still commit (unknown); a read is forgotten, and
// the Driver's later answer, if any, finds it done.
func (r *lrun) timeout(op *clientOp) {
	if op.done {
		return
	}
	if op.in.kind == opGet || op.model != nil {
		r.finishOp(op, regOutput{}, true)
		return
	}
	r.unknownOp(op)
}

// finishOp ends an operation: recorded with its output, or dropped.
func (r *lrun) finishOp(op *clientOp, out regOutput, drop bool) {
	if op.done {
		return
	}
	if drop {
		r.hist.drop(op)
	} else {
		r.hist.finish(op, out, r.w.now)
	}
	op.fire(out)
}

func (r *lrun) completeWrite(p *lproc, op *clientOp, res any) {
	ok, err := p.state.Written(res)
	if err != nil {
		r.fail("a committed command failed to apply: %v", err)
		return
	}
	r.finishOp(op, regOutput{ok: ok}, false)
	if r.w.now > r.gst {
		r.ackAfterGST++
	}
}

// dropPending ends what was in flight at a crashed process: its Driver
// reports every write not yet answered as of unknown outcome and fails
// every read.
func (r *lrun) dropPending(p *lproc) {
	if p.d != nil {
		p.d.Close(errCrashed)
	}
}
