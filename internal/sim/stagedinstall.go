package sim

import (
	"bytes"
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// installStaged installs a snapshot from a leader into q's state machine,
// which stages what it is sent (fsm.StagingFSM), as edictlog.Node's
// receiveStaged does: the stream staged in the state machine's own store
// (replog.StageSnapshot), then the Driver's second check and the record of
// the snapshot (replog.SaveStagedSnapshot, holding no copy of the state),
// then the state machine's install (replog.InstallStagedSnapshot). A crash
// may come at the boundary after each of the first two. It returns the
// install's refusal, to answer the sender with; a crash reports nothing
// (q is then down). The caller runs it inside r.call(q, …).
func (r *lrun) installStaged(q *lproc, d *replog.Driver, st fsm.StagingFSM, from edict.ProcessID, meta wire.SnapshotHeader, data []byte) error {
	if err := replog.StageSnapshot(st, meta.LastIndex, bytes.NewReader(data)); err != nil {
		r.fail("%v: stage a snapshot at %d from %v: %v", q.id, meta.LastIndex, from, err)
		return err
	}
	r.boundary(q, func() string {
		return fmt.Sprintf("staged a snapshot at %d from %v, not yet recorded", meta.LastIndex, from)
	}, true)
	if !q.up {
		return nil
	}
	err := d.InstallSnapshot(from, meta, func() error {
		sm := wire.SnapshotMeta{Index: meta.LastIndex, Reign: meta.Reign, Stamp: meta.LastStamp,
			Config: wire.EpochConfig{Epoch: meta.Epoch, Members: meta.Members, Learners: meta.Learners}}
		if _, err := replog.SaveStagedSnapshot(q.snaps, sm); err != nil {
			return err
		}
		// The stores cover the snapshot from here on: the record, and the
		// state staged beside the state machine's, which a start installs.
		q.snapPos, q.snapMetaOnly, q.snapStaged = wire.Position{Index: sm.Index, Stamp: sm.Stamp}, true, true
		r.boundary(q, func() string {
			return fmt.Sprintf("recorded a snapshot at %d from %v that its state machine staged, not yet installed", meta.LastIndex, from)
		}, true)
		return nil
	})
	if !q.up {
		return nil // crashed inside the install
	}
	if err != nil {
		if derr := st.DiscardStaged(); derr != nil {
			r.fail("%v: discard a snapshot staged at %d: %v", q.id, meta.LastIndex, derr)
		}
		return err
	}
	if err := replog.InstallStagedSnapshot(st, meta.LastIndex); err != nil {
		r.fail("%v: install a snapshot staged at %d: %v", q.id, meta.LastIndex, err)
		return err
	}
	return nil
}

// restored is what follows a snapshot's install into q's state machine,
// staged or restored: the position it holds, the model told, and the
// Driver. False if the model refused it.
func (r *lrun) restored(q *lproc, d *replog.Driver, meta wire.SnapshotHeader) bool {
	q.applied, q.lastApplied = meta.LastIndex, wire.Entry{}
	if q.ds != nil {
		q.lastApplied = wire.Entry{Index: meta.LastIndex, Reign: meta.Reign, Stamp: meta.LastStamp}
	}
	r.snapshots++
	if !r.modelRestored(q, meta.LastIndex) {
		return false
	}
	d.Applied(meta.LastIndex, nil)
	return true
}
