package mvcc

// The store's rule that edictkv's simulator runs
// (cmd/edictkv/internal/simstate) must catch when it is switched off: a
// build with -tags edictmutate can switch it off (mutation_on.go, through
// the one switch of the log's and elect's rules); every other build
// compiles the check unchanged (mutation_off.go). docs/protocol.md lists
// it with what caught it.
const (
	// RuleCompactKeepsNewest: a compaction at rev keeps, of each key, its
	// newest revision at or below rev (keyIndex.compact): reads at rev and
	// after, until the key's next revision, need it.
	RuleCompactKeepsNewest = "compact-keeps-newest"
)
