// Package mvcc is edictkv's multi-version key-value store: etcd's revision
// semantics, its history kept in a [backend.Backend] (a bbolt file in
// production, memory in the simulator) and its key index in memory, as
// etcd's server/storage/mvcc does. The replicated state machine applies
// log entries to it; it knows nothing of the log beyond the index each
// change comes with.
//
// # Revisions
//
// An empty store is at revision 1 (as etcd's: the first write gets 2).
// Each write transaction that changes something ([Store.Write],
// [TxnWrite.End]) moves the store to the next revision, without gaps; one
// that changes nothing leaves it. Its changes get sub revisions 0, 1, … in
// order. A key's create_revision, mod_revision and version are etcd's:
// a put of a key that does not exist starts a generation (create_revision
// the put's revision, version 1); each later put adds 1 to the version; a
// delete writes a tombstone that ends the generation. Reads at any revision
// from [Store.CompactRev] to [Store.Rev] see the keys as they were
// (ErrCompacted below, ErrFutureRev above). Ranges take every etcd option
// (limit, count, keys only, sorts, revision filters) and apply it while
// walking the index; see [Store.Range] and [RangeOptions].
//
// # Log indexes
//
// Every change comes with the log index of the entry that makes it, above
// the last one ([ErrIndexApplied] otherwise): [Store.Write],
// [Store.Compact], and [Store.SetConsistentIndex] for entries that change
// nothing. The store keeps the index of the last entry applied (the
// consistent index, etcd's name) in its meta bucket with the changes, and
// maps each revision to the index of the entry that made it
// ([Store.RevisionIndex]).
//
// # Durability
//
// Changes are buffered in memory and committed to the backend in batches,
// each one atomic (one bbolt transaction, fsynced): when BatchLimit
// changes are pending, every BatchInterval with [Options.Background], and
// on [Store.Commit], [Store.Snapshot] and [Store.Close]. A batch always
// ends between two entries, and carries the consistent index of the last.
// After a crash the store reopens exactly at the last committed batch:
// [Store.ConsistentIndex] tells which entries to apply again from the log;
// nothing later survives, nothing earlier is lost. [Store.DurableIndex]
// and Commit's result say how far the backend holds.
//
// # Compaction
//
// [Store.Compact] at rev compacts the index at once: per key, the newest
// revision at or below rev is kept, unless it is a tombstone that ended its
// generation before rev; older revisions, and keys with nothing left,
// go. The scheduled compaction is recorded with the entry; the revisions
// it drops leave the backend in batches ([Store.CompactStep]), each
// interleaved with writes, and the last records it finished. A crash in
// between resumes it at the next Open. The revision bucket keeps the
// entries from the compaction revision on, and the key bucket every change
// of the compaction revision itself, for watchers that start there.
//
// # Watches
//
// A [WatchStream] ([Store.NewWatchStream]) holds watchers sharing one
// channel, as etcd's mvcc.WatchStream does: [WatchStream.Watch] with an ID
// the caller chooses or [AutoWatchID], [WatchStream.Cancel],
// [WatchStream.RequestProgress], [WatchStream.Close]. A watcher of the keys
// in [key, end) from revision R is sent, in revision order, every change
// to those keys at every revision from R on, each once: none skipped,
// none repeated, the events of one revision in one response — until it is
// cancelled, its stream is closed, or a compaction passes the next
// revision it is to be sent: it then gets a response with CompactRevision
// set and is gone (etcd's ErrCompacted; watching again from
// CompactRevision is possible, and gets every change of that revision).
// Start revision 0 means the next revision; a start revision above the
// store's waits for it, so that a client that reconnects to a member
// behind the one it left neither misses nor repeats an event. This holds
// across [Store.Restore] and [Store.InstallStaged]: every watcher
// continues from its next revision on the new history, from history if
// the new state holds it, cancelled by compaction if not.
//
// A PUT event carries the key as the change left it; a DELETE the key and,
// as mod_revision, the revision of the deletion (etcd's tombstone
// events). With [WatchPrevKV] each event also carries the key as the
// change found it. The store attaches it, where etcd's server reads it
// with a Range at the event's revision − 1: the store knows the revision's
// changes, reads the previous state once per event for every watcher that
// asks, and reads it before a compaction can remove it, where etcd's server
// silently leaves prev_kv out when a compaction passed revision − 1 before
// its Range. The one exception is etcd's too: an event at the compaction
// revision itself, sent from history, has no prev_kv when the key's state
// before it is compacted away.
//
// The watchers are in etcd's three groups. Synced watchers, at the store's
// revision (or waiting for a future start revision), are offered each
// write transaction's events by [TxnWrite.End] once reads see them;
// matching a change costs a map lookup for the watchers of single keys
// and O(log n + matches) in an interval treap for the watchers of ranges.
// Unsynced watchers (started below the store's revision, or behind after a
// parked response or a Restore) catch up from history by [Store.WatchStep]:
// up to 512 at a time, furthest behind first, reading the key bucket by
// revision through a read view (buffered layers and the backend), at most
// Options.WatchBatchLimit entries per step rounded up to a whole revision;
// a watcher that reaches the store's revision joins the synced ones. A
// response whose stream's channel is full is parked on the stream (etcd's
// victims): its watcher leaves its group until WatchStep finds room and
// sends it, then catches up from history; nothing else is sent on that
// stream while responses are parked there, so they go out in order.
//
// Nothing waits for a watcher: End, WatchStep and progress requests only
// offer responses to channels that have room. A stream that is never read
// delays neither writes nor other streams: its watchers park one response
// each, then wait. Memory is bounded: a stream holds at most
// Options.WatchBuffer responses in its channel and one parked response
// per watcher; a response holds the watcher's events of one revision
// (from End) or of at most WatchBatchLimit key-bucket entries rounded up
// to a whole revision (from WatchStep); a catch-up step holds as many
// entries for at most 512 watchers. Events' KeyValues are shared between
// the watchers that get them and must not be modified. [Store.WatchStats]
// counts the parked responses and their events.
//
// [WatchStream.RequestProgress] and [WatchStream.RequestProgressAll]
// answer as etcd's: only for synced watchers that started at or below the
// store's revision, with that revision, every event up to which the
// watchers have been sent; periodic progress (progress_notify) is the
// server's, by the same calls.
//
// # Concurrency
//
// Reads ([Store.Range], [Store.Read], [Store.HashByRev]) are safe for
// concurrent use with each other and with writes, compaction, commits,
// snapshots, Restore and InstallStaged, and never see half a write
// transaction: they read at the revision of the last completed one,
// through the buffered changes and a backend view. A long range lets
// writes in between chunks of its index walk. Write transactions,
// Compact, CompactStep, Restore, InstallStaged and Close run one at a
// time; Stage runs beside all of them (it touches only what is staged).
// Only index compaction and the final swap of Restore and InstallStaged
// wait for reads in progress (a catch-up step of WatchStep is one). Watch
// streams are safe for concurrent use with everything.
//
// # Determinism
//
// With a [backend.Memory] and without Options.Background, nothing in the
// store depends on time, goroutine scheduling or map iteration order: the
// same calls give the same state, results, backend commits and watch
// responses. That is how the simulator runs it, calling Commit,
// CompactStep and WatchStep itself.
package mvcc
