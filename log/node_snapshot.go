package log

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// compactAfterSnapshot drops the log behind a durable snapshot, keeping
// TrailingEntries, in memory (on the loop) and then in the store, and
// tells the observers of the snapshot.
func (n *Node) compactAfterSnapshot(index uint64) {
	_ = n.do(context.Background(), func() {
		n.pending = append(n.pending, Event{Kind: SnapshotTaken, Index: index})
		upTo, err := n.core.Compact(n.d.Now(), index, n.cfg.TrailingEntries)
		if err != nil || upTo == 0 {
			return
		}
		go func() {
			if err := n.cfg.Store.CompactPrefix(upTo); err != nil {
				n.log.Error("compact log", "upTo", upTo, "err", err)
			}
		}()
	})
}

// sendSnapshot streams the newest snapshot to a follower that lacks
// compacted entries, without holding it in memory.
func (n *Node) sendSnapshot(peer edict.ProcessID) {
	fail := func(err error) {
		n.log.Warn("snapshot to follower", "peer", uint64(peer), "err", err)
		n.d.SnapshotSent(peer, 0, err)
	}
	metas, err := n.cfg.Snapshots.List()
	if err != nil || len(metas) == 0 {
		fail(fmt.Errorf("no snapshot to send: %v", err))
		return
	}
	m := metas[0]
	tm, ok := n.core.SnapshotMeta(wire.Position{Index: m.Index, Stamp: m.Stamp}, m.Size)
	if !ok {
		fail(ErrNotLeader)
		return
	}
	go func() {
		_, rc, err := n.cfg.Snapshots.Open(m.ID)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			err = n.cfg.Transport.SendSnapshot(ctx, peer, tm, rc)
			cancel()
			rc.Close()
		}
		_ = n.do(context.Background(), func() {
			if err != nil {
				n.log.Warn("snapshot to follower", "peer", uint64(peer), "err", err)
			}
			n.d.SnapshotSent(peer, m.Index, err)
		})
	}()
}

// receiveSnapshot installs a snapshot from the leader in three steps: the
// acceptance rule is checked when the stream starts; the stream is stored
// whole in the snapshot store, off the loop, unpublished; then, on the loop,
// the Core checks the rule again (SnapshotInstalled) — while the snapshot
// streamed this process may have accepted a newer reign or committed past
// it — and only then is the snapshot published and the state machine
// restored from it. Restoring before the second check once let a refused
// install leave the state machine ahead of, or behind, the log.
func (n *Node) receiveSnapshot(in *wire.IncomingSnapshot) {
	if err := n.d.AcceptSnapshot(in.From, in.Header); err != nil {
		_ = in.Finish(err)
		return
	}
	tm := in.Header
	meta := wire.SnapshotMeta{Index: tm.LastIndex, Reign: tm.Reign, Stamp: tm.LastStamp,
		Config: wire.EpochConfig{Epoch: tm.Epoch, Members: tm.Members, Learners: tm.Learners}}
	sink, err := n.cfg.Snapshots.Create(meta)
	if err != nil {
		_ = in.Finish(fmt.Errorf("create snapshot: %w", err))
		return
	}
	go func() {
		if _, err := io.Copy(sink, in); err != nil {
			_ = sink.Cancel()
			_ = in.Finish(fmt.Errorf("receive snapshot: %w", err))
			return
		}
		handled := false
		derr := n.do(context.Background(), func() {
			handled = true
			if err := n.installSnapshot(in, tm, sink); err != nil {
				_ = in.Finish(err)
				return
			}
			_ = in.Finish(nil)
		})
		if derr != nil && !handled {
			_ = sink.Cancel()
			_ = in.Finish(derr)
		}
	}()
}

// installSnapshot runs on the loop once the stream is stored: the second
// check, the publication, the Core's install, and the restore, which the
// applier runs after every entry it was handed before (all at or below the
// commit index, which the snapshot is ahead of).
func (n *Node) installSnapshot(in *wire.IncomingSnapshot, tm wire.SnapshotHeader, sink wire.SnapshotSink) error {
	if err := n.d.InstallSnapshot(in.From, tm, sink.Close); err != nil {
		_ = sink.Cancel()
		return err
	}
	id := sink.ID()
	n.applier.enqueue(applyJob{restore: &restoreJob{
		open: func() (io.ReadCloser, error) {
			_, rc, err := n.cfg.Snapshots.Open(id)
			return rc, err
		},
		index: tm.LastIndex, stamp: tm.LastStamp,
		after: func(err error) {
			if err != nil {
				// The Core has moved to the snapshot; a state machine that
				// cannot follow it must not go on applying.
				n.stopWith(fmt.Errorf("log: restore installed snapshot %s: %w", id, err))
			}
		},
	}})
	return nil
}
