package elect

// The lease protocol's safety rules that the log's mutation runner also
// switches off one at a time (see log/mutation.go and docs/protocol.md).
const (
	// RuleQuarantineGrants: a restarted process grants nothing for
	// (1+ρ)·MaxLease (onGrantRequest): it may have forgotten a grant.
	RuleQuarantineGrants = "quarantine-grants"
	// RuleWedgeOnEpochChange: a granter of epoch e wedges before a member
	// of e+1 takes a lease in e+1; e+1 grants nothing until e terminated
	// (onWedgeReply, onGrantRequest).
	RuleWedgeOnEpochChange = "wedge-on-epoch-change"
	// RuleReplyAttempt: a grant counts only toward the attempt it answers,
	// named by (p, Start_p) (onGrantReply).
	RuleReplyAttempt = "reply-attempt"
	// RuleCampaignFallback, a liveness rule: a member that has seen no
	// leader for FallbackAfter campaigns whatever the detector names
	// (maybeStart).
	RuleCampaignFallback = "campaign-fallback"
	// RuleNoEpochSkip: a process runs in an epoch only if it knows every
	// epoch before it TERMINATED, those it never knew included
	// (lowestUnterminated).
	RuleNoEpochSkip = "no-epoch-skip"
	// RuleStandAside, a liveness rule: a leader that lost its lease
	// through its own slowness stands aside for MaxLease, and only a
	// campaign ends a lapse suspicion (standAsideIfLate, Campaigned).
	RuleStandAside = "stand-aside"
	// RuleRenewalPatience, a liveness rule: a renewal is not given up
	// while the lease holds; its silent granters are asked again in the
	// same instance (checkAttempt).
	RuleRenewalPatience = "renewal-patience"
	// RuleNoCampaignHeard: a process that knows its epoch only from a
	// peer's news (Heard) does not campaign in it: its log may lack the
	// stop edict that began it, and with it what the epoch before
	// committed (maybeStart, Campaign).
	RuleNoCampaignHeard = "no-campaign-heard"
	// RuleAdaptiveLead, a liveness rule: a leader renews as early as twice
	// the longest stall it saw lately asks, and takes a lease long enough
	// for it, up to MaxLease (leadAt); switched off, it renews with the
	// configuration's lead whatever its host does.
	RuleAdaptiveLead = "adaptive-lead"
)

var mutationRules = []string{RuleQuarantineGrants, RuleWedgeOnEpochChange, RuleReplyAttempt, RuleCampaignFallback, RuleNoEpochSkip, RuleStandAside, RuleRenewalPatience, RuleNoCampaignHeard, RuleAdaptiveLead}
