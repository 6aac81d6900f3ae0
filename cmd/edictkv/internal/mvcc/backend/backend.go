// Package backend is the durable storage under package mvcc: named buckets of
// byte keys kept in sorted order, read through views of the committed state
// and changed by atomic batches. [Bolt] keeps them in a bbolt file;
// [Memory] keeps them in memory, for tests and the simulator, and can
// [Memory.Crash].
//
// What every Backend guarantees:
//
//   - Commit applies a whole [Batch] or, on error, none of it; once it
//     returns nil the batch survives a crash (bbolt fsyncs; Memory's committed
//     state is what Crash keeps).
//   - A [ReadTx] sees the state committed when it began, whatever is
//     committed or restored afterwards, until Release.
//   - Restore builds the new database beside the current one and touches
//     the current one only in [Restored.Install]; until then, and whenever
//     it fails, the current database is as it was.
//   - [Restored.Stage] keeps a restored database, durably, where a restart
//     finds it ([Backend.Staged]): one at a time, beside the current
//     database, until it is installed or discarded. A crash during Install
//     leaves the old database with the staged one as it was, or the new
//     database and nothing staged.
//
// A Backend does no buffering of its own and knows nothing of revisions:
// batching, read-your-writes and the schema are package mvcc's.
package backend

import (
	"errors"
	"io"
)

// ErrClosed is returned by a closed backend, and by a [Memory] that crashed.
var ErrClosed = errors.New("backend: closed")

// ErrNotStaged is returned by [Backend.Staged] when nothing is staged.
var ErrNotStaged = errors.New("backend: nothing is staged")

// Backend is durable storage of named buckets of sorted keys. Its methods
// are safe for concurrent use.
type Backend interface {
	// Begin returns a view of the state committed so far.
	Begin() (ReadTx, error)
	// Commit applies b atomically and durably. A put into a bucket that
	// neither exists nor is created earlier in b is an error, and nothing
	// of b is applied.
	Commit(b *Batch) error
	// Size is the size of the database: what it takes on disk, including
	// pages freed by deletes that later writes will reuse.
	Size() int64
	// SizeInUse is the part of Size that holds data.
	SizeInUse() int64
	// Restore reads to its end a database streamed by [ReadTx.WriteTo] and
	// builds it beside the current one, verified as far as the backend can
	// (a truncated or corrupt stream is an error). The current database is
	// untouched until the returned Restored is installed.
	Restore(r io.Reader) (Restored, error)
	// Staged returns the database [Restored.Stage] kept, in this life or
	// an earlier one (then verified as Restore verifies one), or
	// ErrNotStaged.
	Staged() (Restored, error)
	// DiscardStaged removes the staged database, if there is one.
	DiscardStaged() error
	// Close releases the database once every view of it is released, and
	// the staged one, which stays staged.
	Close() error
}

// Restored is a database built by [Backend.Restore], not yet in use.
type Restored interface {
	// Begin returns a view of the restored database, to check it before
	// installing it.
	Begin() (ReadTx, error)
	// Stage keeps the restored database durably where a restart finds it
	// ([Backend.Staged]), in place of the one staged before, if any. On
	// error nothing is staged; the Restored may still be installed or
	// discarded.
	Stage() error
	// Install makes the restored database the backend's current one,
	// atomically: a crash during Install leaves either the old database or
	// the new one. Views begun before keep reading the old one. On error
	// nothing changed, and the Restored is discarded unless it is staged,
	// which it stays. A staged database is staged no more once installed.
	Install() error
	// Discard removes the restored database (staged or not). It is a
	// no-op after Install.
	Discard()
}

// ReadTx is a view of a committed state. It is for one goroutine at a
// time. Byte slices it returns are valid until Release and must not be
// modified.
type ReadTx interface {
	// HasBucket reports whether the bucket exists.
	HasBucket(bucket []byte) bool
	// Get returns the value of key in bucket, or nil if there is none.
	Get(bucket, key []byte) []byte
	// Ascend calls fn for each key of bucket in [from, to), in ascending
	// order, until fn returns false. A nil to means the end of the bucket.
	Ascend(bucket, from, to []byte, fn func(k, v []byte) bool)
	// WriteTo streams the whole database as this view sees it, in the form
	// [Backend.Restore] reads.
	WriteTo(w io.Writer) (int64, error)
	// Size is the number of bytes WriteTo writes.
	Size() int64
	// Release ends the view. It is safe to call more than once.
	Release()
}

type opKind uint8

const (
	opCreateBucket opKind = iota + 1
	opPut
	opDelete
)

type op struct {
	kind        opKind
	bucket, key []byte
	value       []byte
}

// Batch is a list of changes that [Backend.Commit] applies atomically, in
// order. The batch keeps the slices it is given: do not modify them until
// Commit returns.
type Batch struct {
	ops []op
}

// NewBatch returns an empty batch with room for n changes.
func NewBatch(n int) *Batch { return &Batch{ops: make([]op, 0, n)} }

// CreateBucket creates the bucket if it does not exist.
func (b *Batch) CreateBucket(bucket []byte) {
	b.ops = append(b.ops, op{kind: opCreateBucket, bucket: bucket})
}

// Put sets key to value in bucket.
func (b *Batch) Put(bucket, key, value []byte) {
	b.ops = append(b.ops, op{kind: opPut, bucket: bucket, key: key, value: value})
}

// Delete removes key from bucket; deleting an absent key is a no-op.
func (b *Batch) Delete(bucket, key []byte) {
	b.ops = append(b.ops, op{kind: opDelete, bucket: bucket, key: key})
}

// Len is the number of changes in the batch.
func (b *Batch) Len() int { return len(b.ops) }
