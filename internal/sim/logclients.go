package sim

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/storage"
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
		key := fmt.Sprintf("k%d", r.w.rng.IntN(r.sc.Keys))
		op := &clientOp{client: id, call: r.w.now, proc: p.id}
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

func (r *lrun) submit(p *lproc, op *clientOp) {
	r.call(p, func(now edict.Time) {
		if op.in.kind == opGet {
			r.nextRead++
			r.reads[r.nextRead] = op
			op.readID = r.nextRead
			p.core.Read(now, r.nextRead, op.in.level)
			return
		}
		var cmd fsm.Command
		if op.in.kind == opPut {
			cmd = fsm.Command{Put: &fsm.Put{Key: op.in.key, Value: op.in.value}}
		} else {
			cmd = fsm.CASValue(op.in.key, op.in.expect, op.in.value)
		}
		data, err := fsm.EncodeCommand(cmd)
		if err != nil {
			r.fail("encode command: %v", err)
			return
		}
		e, err := p.core.Propose(now, storage.EntryCommand, data)
		if err != nil {
			r.finishOp(op, regOutput{}, true) // refused: certainly no effect
			return
		}
		op.stamp = e.Stamp
		r.writes[p.id][e.Index] = op
		r.hist.invokeWrite(op)
		p.core.Flush(now)
	})
}

// timeout: a write may still commit (unknown); a read is forgotten.
func (r *lrun) timeout(op *clientOp) {
	if op.done {
		return
	}
	if op.in.kind == opGet {
		delete(r.reads, op.readID)
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

func (r *lrun) completeWrite(op *clientOp, res any) {
	out := regOutput{ok: true}
	if rr, ok := res.(*fsm.Result); ok && rr.Txn != nil {
		out.ok = rr.Txn.Succeeded
	} else if err, isErr := res.(error); isErr {
		r.fail("a committed command failed to apply: %v", err)
		return
	}
	r.finishOp(op, out, false)
	if r.w.now > r.gst {
		r.ackAfterGST++
	}
}

func (r *lrun) onReadState(p *lproc, rs log.ReadState) {
	op := r.reads[rs.ID]
	if op == nil || op.done {
		return
	}
	if rs.Err != nil {
		delete(r.reads, rs.ID)
		r.finishOp(op, regOutput{}, true)
		return
	}
	op.index = rs.Index
	op.lease = rs.Leader == p.id && op.in.level != log.ReadStale
	r.readWait[p.id] = append(r.readWait[p.id], op)
}

// serveReads answers p's reads whose index is applied; a lease read only
// while C_p < E_p at this moment and no suspend happened since the reign
// began (DESIGN §3, §6), as log.Node.serveReads.
func (r *lrun) serveReads(p *lproc) {
	keep := r.readWait[p.id][:0]
	for _, op := range r.readWait[p.id] {
		if op.done {
			continue
		}
		if op.index > p.applied {
			keep = append(keep, op)
			continue
		}
		delete(r.reads, op.readID)
		if now := p.now(r.w.now); op.lease && (!p.core.CanServeLease(now) || r.leaseSuspended(p, now)) {
			r.finishOp(op, regOutput{}, true)
			continue
		}
		kv, _ := p.kv.Get(op.in.key)
		r.finishOp(op, regOutput{value: kv.Value}, false)
	}
	r.readWait[p.id] = keep
}

// dropPending ends what was in flight at a crashed process.
func (r *lrun) dropPending(p *lproc) {
	for idx, op := range r.writes[p.id] {
		delete(r.writes[p.id], idx)
		r.unknownOp(op)
	}
	for _, op := range r.readWait[p.id] {
		r.finishOp(op, regOutput{}, true)
	}
	r.readWait[p.id] = nil
	for id, op := range r.reads {
		if op.proc == p.id {
			delete(r.reads, id)
			r.finishOp(op, regOutput{}, true)
		}
	}
}
