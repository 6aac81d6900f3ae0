package mvcc

// The store's rules that edictkv's simulator runs
// (cmd/edictkv/internal/simstate), or the store's own tests, must catch
// when one is switched off: a build with -tags edictmutate can switch one
// off (mutation_on.go, through the one switch of the log's and elect's
// rules); every other build compiles the checks unchanged
// (mutation_off.go). docs/protocol.md lists them with what caught them.
const (
	// RuleCompactKeepsNewest: a compaction at rev keeps, of each key, its
	// newest revision at or below rev (keyIndex.compact): reads at rev and
	// after, until the key's next revision, need it.
	RuleCompactKeepsNewest = "compact-keeps-newest"
	// RuleWatchCatchUpWhole: a catch-up response carries every event read
	// for its watcher up to its Revision (syncWatchers); TestWatchModel
	// catches it.
	RuleWatchCatchUpWhole = "watch-catchup-whole"
	// RuleWatchRestoreUnsynced: a Restore or InstallStaged moves every
	// synced watcher whose next revision the new state holds to the
	// unsynced ones (watchHub.restored), which catch up from history:
	// the revisions the snapshot brought are sent like any other.
	// TestWatchModel and edictkv's simulator (simstate's TestMutations)
	// catch it.
	RuleWatchRestoreUnsynced = "watch-restore-unsynced"
)
