package edictlog

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
)

// Why a membership change was refused, wrapped in a *MembershipError.
var (
	// ErrAlreadyMember: the process is already a member or a learner.
	ErrAlreadyMember = replog.ErrAlreadyMember
	// ErrNotMember: the process is neither a member nor a learner (Remove),
	// or not a member (a transfer's target).
	ErrNotMember = replog.ErrNotMember
	// ErrNotLearner: only a learner can be promoted.
	ErrNotLearner = replog.ErrNotLearner
	// ErrLastMember: the last member cannot be removed.
	ErrLastMember = replog.ErrLastMember
	// ErrQuorumLost: the new configuration would have no live quorum
	// among the members this leader hears from (see Force).
	ErrQuorumLost = replog.ErrQuorumLost
	// ErrChangeInProgress: a membership edict this leader appended is not
	// committed yet; one change at a time.
	ErrChangeInProgress = replog.ErrChangeInProgress
	// ErrBadAddress: a learner's address no process can be reached at.
	ErrBadAddress = replog.ErrBadAddress
)

// MembershipError is a membership change refused (AddLearner, Promote,
// Remove, SetAddress, TransferLeadership's target); Err is one of the
// sentinels above, so errors.Is tells the cases apart.
type MembershipError struct {
	// Op is the change: "add learner", "promote", "remove" or "transfer".
	Op      string
	Process edict.ProcessID
	// Epoch is the epoch the leader was in.
	Epoch uint64
	// Live are, for ErrQuorumLost, the members of the new configuration
	// the leader heard from within the liveness window, itself included.
	Live []edict.ProcessID
	Err  error
}

// Error reads as the protocol's refusal it was made from.
func (e *MembershipError) Error() string {
	return (&replog.MembershipError{Op: e.Op, Process: e.Process, Epoch: e.Epoch, Live: e.Live, Err: e.Err}).Error()
}

func (e *MembershipError) Unwrap() error { return e.Err }

// ChangeOption adjusts a membership change (Node.PromoteWith and
// Node.RemoveWith).
type ChangeOption func(*changeOptions)

type changeOptions struct{ force bool }

// Force lets a Promote or Remove through that the quorum check would
// refuse: one whose new configuration has no quorum among the processes
// the leader heard from lately (etcd's --strict-reconfig-check turned
// off). It is for recovery by an operator who knows the members the
// leader does not hear from will come back: until a quorum of the new
// configuration is up, the new epoch has no leader and takes no writes.
// It does not bypass anything safety rests on. A leader that removes
// itself with Force ends its epoch itself and hands the next one over,
// rather than retire (Node.Remove): the next leader's own quorum check
// is skipped too, at a round trip's cost.
func Force() ChangeOption { return func(o *changeOptions) { o.force = true } }

func foldChanges(opts []ChangeOption) changeOptions {
	var o changeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// coreOptions are opts in the protocol's words.
func coreOptions(opts []ChangeOption) []replog.ChangeOption {
	if foldChanges(opts).force {
		return []replog.ChangeOption{replog.Force()}
	}
	return nil
}
