package kvservice

import (
	"errors"
	"fmt"

	"github.com/edictlog/edictlog"
)

// The errors of the KV service: every error it returns wraps one of them
// (or is a *edictlog.NotLeaderError, or the caller's context's error), and
// each adapter maps them to its own answers — etcd's rpctypes errors for
// gRPC, HTTP statuses and codes for the HTTP API. The messages of the
// ones etcd has are etcd's, without its "etcdserver: " or "mvcc: "
// prefix; the wrapping error adds what was wrong.
var (
	// ErrEmptyKey: a request names no key.
	ErrEmptyKey = errors.New("key is not provided")
	// ErrKeyTooLarge: a key (or range end) is over Limits.MaxKeyBytes.
	ErrKeyTooLarge = errors.New("key too large")
	// ErrValueTooLarge: a value is over Limits.MaxValueBytes.
	ErrValueTooLarge = errors.New("value too large")
	// ErrRequestTooLarge: the request as a whole is over
	// Limits.MaxRequestBytes.
	ErrRequestTooLarge = errors.New("request is too large")
	// ErrTooManyOps: a Txn branch, or its compares, over Limits.MaxTxnOps.
	ErrTooManyOps = errors.New("too many operations in txn request")
	// ErrDuplicateKey: a Txn branch writes one key twice.
	ErrDuplicateKey = errors.New("duplicate key given in txn request")
	// ErrInvalid: a request that makes no sense (a negative limit, an
	// unknown sort order or compare, a value given with ignore_value).
	ErrInvalid = errors.New("invalid request")
	// ErrUnsupported: a request that needs a feature edictkv does not
	// have yet (leases).
	ErrUnsupported = errors.New("not supported yet")
	// ErrCompacted: a read at a revision older than the oldest the state
	// keeps (see *RevisionError).
	ErrCompacted = errors.New("required revision has been compacted")
	// ErrFutureRev: a read at a revision not yet applied here (see
	// *RevisionError).
	ErrFutureRev = errors.New("required revision is a future revision")
	// ErrNoSpace: the NOSPACE alarm is active: the state takes no Put,
	// and no Txn with a put, until it is deactivated (etcd's capped
	// applier). Deletes and compactions go on.
	ErrNoSpace = errors.New("no space")
	// ErrCorrupt: the CORRUPT alarm is active: the state refuses every KV
	// request (etcd's corrupt applier).
	ErrCorrupt = errors.New("corrupt cluster")
	// ErrKeyNotFound: a Put that keeps a key's value or lease
	// (ignore_value, ignore_lease) names a key that does not exist.
	ErrKeyNotFound = errors.New("key not found")
)

// The outcomes the log decides are its own sentinels, named here so that
// an adapter maps every outcome from this one package.
var (
	// ErrNoLeader: no leader was known, or reachable, within the wait
	// (internal/route gives up with it). Nothing was written.
	ErrNoLeader = edictlog.ErrNoLeader
	// ErrTimeout: a write's outcome is unknown — its deadline passed
	// before it was applied here, or its forwarding broke after it was
	// sent. It may still commit. Also a read that timed out.
	ErrTimeout = edictlog.ErrOutcomeUnknown
	// ErrLeaderChanged: the leader lost its lease while the write was
	// pending and the next reign committed another edict at its index:
	// the write had no effect, and retrying it is safe.
	ErrLeaderChanged = edictlog.ErrNotCommitted
	// ErrStopped: the process is shutting down; nothing was written.
	ErrStopped = edictlog.ErrShutdown
)

// RevisionError refuses a read at a revision the state cannot answer at.
// It wraps ErrCompacted or ErrFutureRev.
type RevisionError struct {
	// Requested is the revision asked for; Oldest the oldest revision the
	// state can answer at (the compaction revision), and Current the
	// newest.
	Requested, Oldest, Current int64
	Err                        error
}

func (e *RevisionError) Error() string {
	if errors.Is(e.Err, ErrFutureRev) {
		return fmt.Sprintf("%v: revision %d is after the current revision %d", e.Err, e.Requested, e.Current)
	}
	if e.Oldest == e.Current {
		return fmt.Sprintf("%v: revision %d is before the current revision %d, and no history is kept", e.Err, e.Requested, e.Current)
	}
	return fmt.Sprintf("%v: revision %d is before the oldest kept, %d", e.Err, e.Requested, e.Oldest)
}

func (e *RevisionError) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// at says where in a request err is, keeping what it wraps.
func at(where string, err error) error { return fmt.Errorf("%s: %w", where, err) }
