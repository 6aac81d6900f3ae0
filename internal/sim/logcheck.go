package sim

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// The log's safety checks against ground truth, run after every call into
// a core once its Ready cycles are carried out (check), and on every batch
// as it is stored (checkStored). They look at what the processes hold and
// promise, not only at what they apply: a divergence whose second entry is
// never applied anywhere, or a commit that a crash silently undoes, is a
// violation the moment it exists.
//
// Ground truth kept in lrun, outside every lproc's volatile state:
//   - committed: index → the one stamp committed there, by whichever
//     process first reported the index committed;
//   - epochMembers: each epoch's members, from epoch 0 and every
//     configuration a process learned;
//   - maxAccepted, storedEpoch: per process, the highest acceptedReign it
//     stored and the highest epoch its stores make it active in, across
//     restarts; memAccepted, memEpoch: the same in memory, this life.

// check runs the per-event checks on p, which is up and has just carried
// out its Ready cycles.
func (r *lrun) check(p *lproc) {
	if !p.up || r.violation != "" {
		return
	}
	st := p.core.Status(p.now(r.w.now))
	r.checkMonotone(p, st.AcceptedReign, "in memory")
	r.checkEpoch(p, st.Epoch, "in memory")
	r.checkOneLeader(p)
	r.checkKept()
	if r.leaderAfterGST == 0 && r.w.now >= r.gst && p.core.CanServeLease(p.now(r.w.now)) {
		r.leaderAfterGST = r.w.now
	}
	for i := p.seenCommit + 1; i <= st.Commit && r.violation == ""; i++ {
		if p.queuedAt(i) {
			// On its way to p's disk: p may learn an entry committed (by
			// a quorum of others) before its own write of it, or of the
			// truncation that replaces a stale entry there, is done.
			// Checked once the write is.
			break
		}
		r.checkCommitted(p, i)
		p.seenCommit = i
	}
}

// checkCommitted checks index i, which p now reports committed: every
// process that reports i committed holds the same entry there (against
// ground truth, whether or not anyone applies it), and the entry is durable
// on a majority of the epoch it was stamped in — the epoch whose quorum
// committed it (a stop edict of epoch e commits in e, on a quorum of e).
// A follower that learns i committed later checks it again: durability
// must hold for as long as the entry is committed.
func (r *lrun) checkCommitted(p *lproc, i uint64) {
	st, own := p.storedStamp(i)
	truth, known := r.committed[i]
	switch {
	case own && known && !st.Equal(truth):
		r.fail("log safety: %v reports index %d committed holding %v, but %v was committed there", p.id, i, st, truth)
		return
	case own && !known:
		r.committed[i] = st
		truth = st
	case !own && !known:
		if i == p.snapPos.Index && !p.snapPos.Stamp.IsZero() {
			// The commit came with a snapshot; its last entry's stamp is
			// known, the ones before are not.
			r.committed[i] = p.snapPos.Stamp
			truth = p.snapPos.Stamp
			break
		}
		if i <= p.snapPos.Index {
			// A snapshot covers it; its stamp is nobody's to tell.
			return
		}
		r.fail("log safety: %v reports index %d committed but holds no entry there (stored log %s, snapshot at %d)",
			p.id, i, p.storedRange(), p.snapPos.Index)
		return
	}
	members := r.epochMembers[truth.Epoch]
	if members == nil {
		r.fail("log safety: index %d committed with stamp %v of epoch %d, which no process knows", i, truth, truth.Epoch)
		return
	}
	var holders []edict.ProcessID
	for _, m := range members {
		if q := r.procs[m]; q != nil && q.holdsDurably(i, truth) {
			holders = append(holders, m)
		}
	}
	if 2*len(holders) <= len(members) {
		r.fail("log safety: %v reports index %d committed (stamp %v), but only %v of epoch %d's members %v hold it durably",
			p.id, i, truth, holders, truth.Epoch, members)
	}
}

// checkOneLeader: at most one running process believes it holds a lease
// (C_p < E_p) at any instant of real time — Leader Uniqueness (eq. 1)
// seen through the processes' own beliefs, which invariant (14) and
// Lemma 3.1 make conservative: a leader's lease ends, in real time, before
// the grants that made it, and another lease needs one of those grants. A
// suspended host is left out: its stopped clock believes what it likes,
// and it must give the lease up on resume, before it acts on it
// (replog.Driver.Now). This is what catches a granter that forgot its grant
// without the restart quarantine, or a suspend counted from too late.
func (r *lrun) checkOneLeader(p *lproc) {
	if p.frozenUntil > r.w.now || !r.believesLeader(p) {
		return
	}
	for _, id := range r.ids {
		q := r.procs[id]
		if q == p || !q.up || q.frozenUntil > r.w.now {
			continue
		}
		if r.believesLeader(q) {
			r.fail("leader uniqueness: %v and %v both believe C_p < E_p%s", p.id, q.id, r.describe())
			return
		}
	}
}

// checkStored runs when p's store takes a batch: the acceptedReign it
// stores never goes back (across restarts too: the maximum lives in lrun).
func (r *lrun) checkStored(p *lproc, b wire.Batch) {
	v, ok := b.Stable[wire.KeyAcceptedReign]
	if !ok {
		return
	}
	reign, err := wire.DecodeStamp(wire.KeyAcceptedReign, v)
	if err != nil {
		r.fail("%v stored an undecodable acceptedReign: %v", p.id, err)
		return
	}
	r.checkMonotone(p, reign, "stored")
}

// checkMonotone checks that acceptedReign never goes back at p, and
// records the new maximum.
//
// The stored and the in-memory values are tracked apart: the runtime
// writes off its loop, so memory runs ahead of the disk (a newer reign
// accepted, its batch not yet durable). Memory starts each life at the
// stored maximum at least (restart resets memAccepted to it), and neither
// may ever go back.
func (r *lrun) checkMonotone(p *lproc, reign edict.Stamp, where string) {
	max := r.maxAccepted
	if where == "in memory" {
		max = r.memAccepted
	}
	prev := max[p.id]
	if reign.IsZero() && prev.IsZero() {
		return
	}
	cmp, err := reign.Compare(prev)
	switch {
	case err != nil:
		r.fail("%v: acceptedReign %v (%s) does not compare with %v: %v", p.id, reign, where, prev, err)
	case cmp < 0:
		r.fail("log safety: %v's acceptedReign went back (%s) from %v to %v", p.id, where, prev, reign)
	case cmp > 0:
		max[p.id] = reign
	}
}

// checkEpoch checks that p's active epoch never goes back: in memory
// within a life, and in what its stores hold across lives. As with
// acceptedReign, memory runs ahead of the disk: the records that moved p
// to a new epoch (its predecessor TERMINATED, the config) wait in a batch
// on their way to the store, and a crash before the write completes
// leaves p in the old epoch when it restarts. That costs nothing: what it
// did in the new epoch meanwhile it did only in memory or as a granter
// (its restart quarantine covers grants it forgot), and the old epoch's
// wedged members still refuse every quorum there. A life's memory starts
// from the stores' epoch at least (restart), so a record the runtime
// wrote and recovery ignores — or one it never wrote at all before
// reporting its write done — is still caught. The stored epoch advances
// when a batch completes: to the epoch p was in when it handed the batch
// over (diskWrite.epoch), which that batch's records and the earlier ones
// must reproduce.
func (r *lrun) checkEpoch(p *lproc, epoch uint64, where string) {
	max := r.memEpoch
	if where == "stored" {
		max = r.storedEpoch
	}
	if prev := max[p.id]; epoch < prev {
		r.fail("log safety: %v's active epoch went back (%s) from %d to %d: %s", p.id, where, prev, epoch, p.core.Debug(p.now(r.w.now)))
		return
	}
	max[p.id] = epoch
}
