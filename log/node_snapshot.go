package log

import (
	"context"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// compactAfterSnapshot drops the log behind a durable snapshot, keeping
// TrailingEntries, in memory (on the loop) and then in the store.
func (n *Node) compactAfterSnapshot(index uint64) {
	_ = n.do(context.Background(), func() {
		upTo, err := n.core.Compact(n.clock.Now(), index, n.cfg.TrailingEntries)
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
		n.core.SnapshotSent(n.clock.Now(), peer, 0, err)
	}
	metas, err := n.cfg.Snapshots.List()
	if err != nil || len(metas) == 0 {
		fail(fmt.Errorf("no snapshot to send: %v", err))
		return
	}
	m := metas[0]
	tm, ok := n.core.SnapshotMeta(storage.Position{Index: m.Index, Stamp: m.Stamp}, m.Size)
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
			n.core.SnapshotSent(n.clock.Now(), peer, m.Index, err)
		})
	}()
}

// receiveSnapshot installs a snapshot from the leader: stored and
// restored in one pass over the stream, then the log reset to it.
func (n *Node) receiveSnapshot(in *transport.IncomingSnapshot) {
	now := n.clock.Now()
	if err := n.core.AcceptSnapshot(now, in.From, in.Meta); err != nil {
		_ = in.Finish(err)
		return
	}
	meta := storage.SnapshotMeta{Index: in.Meta.LastIndex, Reign: in.Meta.Reign, Stamp: in.Meta.LastStamp,
		Config: storage.EpochConfig{Epoch: in.Meta.Epoch, Members: in.Meta.Members, Learners: in.Meta.Learners}}
	sink, err := n.cfg.Snapshots.Create(meta)
	if err != nil {
		_ = in.Finish(fmt.Errorf("create snapshot: %w", err))
		return
	}
	tm := in.Meta
	n.applier.enqueue(applyJob{restore: &restoreJob{
		r: teeReader{in, sink}, index: tm.LastIndex, stamp: tm.LastStamp,
		after: func(err error) {
			if err != nil {
				_ = sink.Cancel()
				_ = in.Finish(err)
				return
			}
			if err := sink.Close(); err != nil {
				_ = in.Finish(err)
				return
			}
			go func() {
				_ = n.do(context.Background(), func() {
					n.core.SnapshotInstalled(n.clock.Now(), in.From, tm)
					if err := n.handleReady(); err != nil {
						n.log.Error("after snapshot install", "err", err)
					}
					_ = in.Finish(nil)
				})
			}()
		},
	}})
}

// teeReader writes what it reads to w, like io.TeeReader, but fails the
// read if the write fails, so a snapshot is never restored unsaved.
type teeReader struct {
	r interface{ Read([]byte) (int, error) }
	w interface{ Write([]byte) (int, error) }
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			return n, werr
		}
	}
	return n, err
}
