package edictlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// compactAfterSnapshot drops the log behind a durable snapshot, keeping
// TrailingEntries, in memory (on the loop) and then in the store, and
// tells the observers of the snapshot. It returns once the store's
// compaction is done; it runs off the loop (the snapshot's writer).
func (n *Node) compactAfterSnapshot(index uint64) error {
	var upTo uint64
	if err := n.do(context.Background(), func() {
		n.pending = append(n.pending, Event{Kind: SnapshotTaken, Index: index})
		var err error
		if upTo, err = n.core.Compact(n.d.Now(), index, n.cfg.TrailingEntries); err != nil {
			n.log.Warn("compact log", "snapshot", index, "err", err)
			upTo = 0
		}
	}); err != nil {
		return err
	}
	if upTo == 0 {
		return nil
	}
	if err := n.cfg.Store.CompactPrefix(upTo); err != nil {
		n.log.Error("compact log", "upTo", upTo, "err", err)
		return fmt.Errorf("edictlog: snapshot at %d is durable, but compacting the log up to %d failed: %w", index, upTo, err)
	}
	return nil
}

// sendSnapshot streams the newest snapshot to a follower that lacks
// compacted entries, without holding it in memory. If that snapshot holds
// no copy of the state (the state machine keeps its own, fsm.DiskFSM), the
// applier captures the state machine's (applier.copyState): a snapshot
// that knows its size (fsm.SizedSnapshot) is streamed straight from its
// Persist, written nowhere on this side; another is first written into
// the snapshot store, whose copy is then streamed as any stored snapshot.
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
	metaOnly, err := replog.IsMetaOnlySnapshot(n.cfg.Snapshots, m)
	switch {
	case err != nil:
		fail(err)
		return
	case metaOnly && n.applier.disk == nil:
		fail(fmt.Errorf("snapshot %s holds no copy of the state, and the state machine keeps none", m.ID))
		return
	case metaOnly:
		// One stored copy serves every peer that asks while it is being
		// made; a captured state, streamed, serves one.
		n.copyFor = append(n.copyFor, peer)
		if len(n.copyFor) == 1 {
			n.copyState()
		}
		return
	}
	n.sendStored(peer, m)
}

// copyState has the applier capture the state machine's state for the
// peers in copyFor.
func (n *Node) copyState() {
	n.applier.enqueue(applyJob{copyFor: func(c stateCopy, err error) {
		taken := false
		_ = n.do(context.Background(), func() {
			taken = true
			peers := n.copyFor
			n.copyFor = nil
			switch {
			case err != nil:
				for _, p := range peers {
					n.log.Warn("snapshot to follower", "peer", uint64(p), "err", err)
					n.d.SnapshotSent(p, 0, fmt.Errorf("copy the state machine's state: %w", err))
				}
			case c.snap == nil:
				for _, p := range peers {
					n.sendStored(p, c.meta)
				}
			default:
				n.sendStream(peers[0], c)
				if len(peers) > 1 {
					n.copyFor = peers[1:]
					n.copyState()
				}
			}
		})
		if !taken && c.snap != nil {
			c.snap.Release()
		}
	}})
}

// sendStream streams the state machine's captured state c to peer,
// straight from its Persist, and releases it.
func (n *Node) sendStream(peer edict.ProcessID, c stateCopy) {
	tm, ok := n.core.SnapshotMeta(wire.Position{Index: c.meta.Index, Stamp: c.meta.Stamp}, c.snap.Size())
	if !ok {
		c.snap.Release()
		n.log.Warn("snapshot to follower", "peer", uint64(peer), "err", ErrNotLeader)
		n.d.SnapshotSent(peer, 0, ErrNotLeader)
		return
	}
	tm.Addrs = n.snapshotAddrs(tm.Members, tm.Learners)
	n.background(func() {
		pr, pw := io.Pipe()
		persisted := make(chan struct{})
		go func() {
			defer close(persisted)
			pw.CloseWithError(c.snap.Persist(pw))
		}()
		ctx, cancel := context.WithTimeout(n.bgCtx, 10*time.Minute)
		err := n.cfg.Transport.SendSnapshot(ctx, peer, tm, pr)
		cancel()
		// A transport that stopped reading leaves Persist blocked on the
		// pipe: closing it ends Persist, which must end before Release.
		pr.CloseWithError(errors.New("edictlog: the snapshot stream ended"))
		<-persisted
		c.snap.Release()
		_ = n.do(context.Background(), func() {
			if err != nil {
				n.log.Warn("snapshot to follower", "peer", uint64(peer), "err", err)
			}
			n.d.SnapshotSent(peer, c.meta.Index, err)
		})
	})
}

// sendStored streams the stored snapshot m to peer.
func (n *Node) sendStored(peer edict.ProcessID, m wire.SnapshotMeta) {
	tm, ok := n.core.SnapshotMeta(wire.Position{Index: m.Index, Stamp: m.Stamp}, m.Size)
	if !ok {
		n.log.Warn("snapshot to follower", "peer", uint64(peer), "err", ErrNotLeader)
		n.d.SnapshotSent(peer, 0, ErrNotLeader)
		return
	}
	tm.Addrs = n.snapshotAddrs(tm.Members, tm.Learners)
	n.background(func() {
		_, rc, err := n.cfg.Snapshots.Open(m.ID)
		if err == nil {
			ctx, cancel := context.WithTimeout(n.bgCtx, 10*time.Minute)
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
	})
}

// peerAddrs is the part of a transport that says where it reaches a peer
// (transport.TCP does).
type peerAddrs interface {
	PeerAddr(id edict.ProcessID) (string, bool)
}

// snapshotAddrs returns the addresses to put on a snapshot that names
// members and learners: every one this Node knows of them. A receiver
// that installs the snapshot skips the config edicts that named the
// processes they added, and their addresses with them. For a peer, the
// address the transport uses comes first: an embedder may have changed
// it with AddPeer since this Node learned one. For this process, the
// address the cluster was given comes first: a transport may listen on
// an address no one else can dial. An address a receiver would refuse
// (wire.CheckAddrs) is left out rather than make the snapshot unsendable;
// learners come first to the size bound, theirs being the addresses the
// newest config edicts carried.
func (n *Node) snapshotAddrs(members, learners []edict.ProcessID) map[edict.ProcessID]string {
	live, _ := n.cfg.Transport.(peerAddrs)
	addrs := map[edict.ProcessID]string{}
	total := 0
	for _, p := range slices.Concat(learners, members) {
		addr, ok := n.peers[p]
		switch {
		case p == n.cfg.ID:
			if !ok {
				addr = n.cfg.Transport.LocalAddr()
			}
		case live != nil:
			if a, ok := live.PeerAddr(p); ok {
				addr = a
			}
		}
		if wire.CheckAddr(addr) == nil && total+len(addr) <= wire.MaxAddrsLen {
			addrs[p] = addr
			total += len(addr)
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	return addrs
}

// receiveSnapshot installs a snapshot from the leader in three steps: the
// acceptance rule is checked when the stream starts; the stream is stored
// whole, off the loop, where nothing uses it yet — in the state machine's
// own store if it stages the snapshots it is sent (fsm.StagingFSM:
// receiveStaged), in the snapshot store, unpublished, otherwise; then, on
// the loop, the Core checks the rule again (SnapshotInstalled) — while the
// snapshot streamed this process may have accepted a newer reign or
// committed past it — and only then is the snapshot recorded (published)
// and the state machine restored from it. Restoring before the second
// check once let a refused install leave the state machine ahead of, or
// behind, the log.
func (n *Node) receiveSnapshot(in *wire.IncomingSnapshot) {
	if err := n.d.AcceptSnapshot(in.From, in.Header); err != nil {
		_ = in.Finish(err)
		return
	}
	tm := in.Header
	// The addresses are stored with the snapshot: a crash after its
	// publication and before the runtime stores them under peers/ would
	// lose them otherwise (Recover reads them back).
	meta := wire.SnapshotMeta{Index: tm.LastIndex, Reign: tm.Reign, Stamp: tm.LastStamp,
		Config: wire.EpochConfig{Epoch: tm.Epoch, Members: tm.Members, Learners: tm.Learners}, Addrs: tm.Addrs}
	if st := n.applier.stager; st != nil {
		if !n.staging.CompareAndSwap(false, true) {
			_ = in.Finish(errors.New("edictlog: a snapshot is being installed already"))
			return
		}
		n.background(func() { n.receiveStaged(st, in, meta) })
		return
	}
	sink, err := n.cfg.Snapshots.Create(meta)
	if err != nil {
		_ = in.Finish(fmt.Errorf("create snapshot: %w", err))
		return
	}
	n.background(func() {
		// The loop's end gives up on the stream at once, even on a read
		// that waits for a sender that has stalled.
		defer context.AfterFunc(n.bgCtx, in.Abort)()
		if _, err := io.Copy(sink, stoppable{n.bgCtx, in}); err != nil {
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
	})
}

// stoppable reads r until ctx ends: a snapshot stream being received when
// the Node stops is abandoned at its next read, so that Stop does not
// wait for a sender that takes its time.
type stoppable struct {
	ctx context.Context
	r   io.Reader
}

func (s stoppable) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrShutdown, err)
	}
	return s.r.Read(p)
}

// receiveStaged installs a snapshot into a state machine that stages
// what it is sent, writing it once: the stream is staged in the state
// machine's own store (StageSnapshot: checked, durable, not in use), then,
// on the loop, the Core's second check, the record of the snapshot's
// metadata (SaveStagedSnapshot, holding no copy of the state) and the
// Core's install, then, on the applier after every entry it was handed
// before, the state machine installs what it staged (a rename, for a
// file). One snapshot is staged at a time (staging).
func (n *Node) receiveStaged(st fsm.StagingFSM, in *wire.IncomingSnapshot, meta wire.SnapshotMeta) {
	tm := in.Header
	fail := func(err error) {
		n.staging.Store(false)
		_ = in.Finish(err)
	}
	discard := func() {
		if err := st.DiscardStaged(); err != nil {
			n.log.Warn("discard a staged snapshot", "index", tm.LastIndex, "err", err)
		}
	}
	stopAbort := context.AfterFunc(n.bgCtx, in.Abort)
	defer stopAbort()
	if err := replog.StageSnapshot(st, tm.LastIndex, stoppable{n.bgCtx, in}); err != nil {
		fail(fmt.Errorf("receive snapshot: %w", err))
		return
	}
	handled := false
	derr := n.do(context.Background(), func() {
		handled = true
		err := n.d.InstallSnapshot(in.From, tm, func() error {
			_, err := replog.SaveStagedSnapshot(n.cfg.Snapshots, meta)
			return err
		})
		if err != nil {
			discard()
			fail(err)
			return
		}
		n.applier.enqueue(applyJob{restore: &restoreJob{
			staged: true, index: tm.LastIndex, reign: tm.Reign, stamp: tm.LastStamp,
			after: func(err error) {
				n.staging.Store(false)
				if err != nil {
					// The Core has moved to the snapshot; a state machine
					// that cannot follow it must not go on applying.
					n.stopWith(fmt.Errorf("edictlog: install the snapshot at %d the state machine staged: %w", tm.LastIndex, err))
				}
			},
		}})
		_ = in.Finish(nil)
	})
	if derr != nil && !handled {
		discard()
		fail(derr)
	}
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
		index: tm.LastIndex, reign: tm.Reign, stamp: tm.LastStamp, size: tm.Size,
		after: func(err error) {
			if err != nil {
				// The Core has moved to the snapshot; a state machine that
				// cannot follow it must not go on applying.
				n.stopWith(fmt.Errorf("edictlog: restore installed snapshot %s: %w", id, err))
			}
		},
	}})
	return nil
}
