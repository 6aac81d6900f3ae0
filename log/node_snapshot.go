package log

import (
	"context"
	"fmt"
	"io"
	"slices"
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
// compacted entries, without holding it in memory. If that snapshot holds
// no copy of the state (the state machine keeps its own, fsm.DiskFSM), the
// applier first makes one in the snapshot store (applier.copyState), and
// that is streamed: a store written whole and then read is what keeps the
// stream's size known up front, and its digest checked, as for any other.
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
	metaOnly, err := IsMetaOnlySnapshot(n.cfg.Snapshots, m)
	switch {
	case err != nil:
		fail(err)
		return
	case metaOnly && n.applier.disk == nil:
		fail(fmt.Errorf("snapshot %s holds no copy of the state, and the state machine keeps none", m.ID))
		return
	case metaOnly:
		// One copy serves every peer that asks while it is being made.
		n.copyFor = append(n.copyFor, peer)
		if len(n.copyFor) > 1 {
			return
		}
		n.applier.enqueue(applyJob{copyFor: func(c wire.SnapshotMeta, err error) {
			_ = n.do(context.Background(), func() {
				peers := n.copyFor
				n.copyFor = nil
				for _, p := range peers {
					if err != nil {
						n.log.Warn("snapshot to follower", "peer", uint64(p), "err", err)
						n.d.SnapshotSent(p, 0, fmt.Errorf("copy the state machine's state: %w", err))
						continue
					}
					n.sendStored(p, c)
				}
			})
		}})
		return
	}
	n.sendStored(peer, m)
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
	// The addresses are stored with the snapshot: a crash after its
	// publication and before the runtime stores them under peers/ would
	// lose them otherwise (Recover reads them back).
	meta := wire.SnapshotMeta{Index: tm.LastIndex, Reign: tm.Reign, Stamp: tm.LastStamp,
		Config: wire.EpochConfig{Epoch: tm.Epoch, Members: tm.Members, Learners: tm.Learners}, Addrs: tm.Addrs}
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
		index: tm.LastIndex, reign: tm.Reign, stamp: tm.LastStamp,
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
