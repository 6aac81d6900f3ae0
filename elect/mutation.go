package elect

// The lease protocol's safety rules that the log's mutation runner also
// switches off one at a time (see internal/replog/mutation.go and
// docs/protocol.md). They are no part of elect's API: the runner names
// them by their strings (MutationRules, in a build with -tags
// edictmutate).
const (
	// ruleQuarantineGrants: a restarted process grants nothing for
	// (1+ρ)·MaxLease (onGrantRequest): it may have forgotten a grant.
	ruleQuarantineGrants = "quarantine-grants"
	// ruleWedgeOnEpochChange: a granter of epoch e wedges before a member
	// of e+1 takes a lease in e+1; e+1 grants nothing until e terminated
	// (onWedgeReply, onGrantRequest).
	ruleWedgeOnEpochChange = "wedge-on-epoch-change"
	// ruleReplyAttempt: a grant counts only toward the attempt it answers,
	// named by (p, Start_p) (onGrantReply).
	ruleReplyAttempt = "reply-attempt"
	// ruleCampaignFallback, a liveness rule: a member that has seen no
	// leader for FallbackAfter campaigns whatever the detector names
	// (maybeStart).
	ruleCampaignFallback = "campaign-fallback"
	// ruleNoEpochSkip: a process runs in an epoch only if it knows every
	// epoch before it TERMINATED, those it never knew included
	// (lowestUnterminated).
	ruleNoEpochSkip = "no-epoch-skip"
	// ruleStandAside, a liveness rule: a leader that lost its lease
	// through its own slowness stands aside for MaxLease, and only a
	// campaign ends a lapse suspicion (standAsideIfLate, Campaigned).
	ruleStandAside = "stand-aside"
	// ruleRenewalPatience, a liveness rule: a renewal is not given up
	// while the lease holds; its silent granters are asked again in the
	// same instance (checkAttempt).
	ruleRenewalPatience = "renewal-patience"
	// ruleNoCampaignHeard: a process that knows its epoch only from a
	// peer's news (Heard) does not campaign in it: its log may lack the
	// stop edict that began it, and with it what the epoch before
	// committed (maybeStart, Campaign).
	ruleNoCampaignHeard = "no-campaign-heard"
	// ruleAdaptiveLead, a liveness rule: a leader renews as early as twice
	// the longest stall it saw lately asks, and takes a lease long enough
	// for it, up to MaxLease (leadAt); switched off, it renews with the
	// configuration's lead whatever its host does.
	ruleAdaptiveLead = "adaptive-lead"
	// ruleCleanStopWaits: a retiring process reports itself retired only
	// once every grant it made has lapsed by its own clock, and the
	// quarantine of its own start has ended (Retired); switched off, it
	// reports so at once, and the next life skips its quarantine while a
	// grant of this one may still stand.
	ruleCleanStopWaits = "clean-stop-waits"
	// ruleCarriedGrants: a granter whose grant in an earlier epoch to p
	// still stands grants in a later epoch to p only (onGrantRequest): a
	// leader that carries its lease past its epoch's end (WedgeKeeping)
	// leads alone until the lease ends or its next reign begins.
	ruleCarriedGrants = "carried-grants"
	// ruleHandOverRelease, a liveness rule: a directed campaign asks again
	// a member whose refusal names the leader that handed over, whose
	// release has not reached it yet (CampaignFor).
	ruleHandOverRelease = "hand-over-release"
	// ruleDirectedPatience, a liveness rule: a directed campaign that no
	// refusal showed a rival asks the silent members again until its
	// deadline, a refusal without a grantee (quarantine) included
	// (checkAttempt).
	ruleDirectedPatience = "directed-patience"
	// ruleAskAfterLapse, a liveness rule: a candidate refused for a grant
	// that ends within a round trip asks that member again once it has
	// ended, instead of counting the refusal (onGrantReply).
	ruleAskAfterLapse = "ask-after-lapse"
	// ruleQuarantinedYields, a liveness rule: a candidate in quarantine
	// gives its campaign up to another member's (yieldCampaign).
	ruleQuarantinedYields = "quarantined-yields"
	// ruleRevokeLateGrants, a liveness rule: a grant to an attempt given
	// up is revoked when it comes, if no attempt or lease is under way
	// (onGrantReply).
	ruleRevokeLateGrants = "revoke-late-grants"
	// ruleDirectedOverQuarantined, a liveness rule: a directed campaign
	// asks again the members whose refusal named a rival in quarantine
	// (onGrantReply).
	ruleDirectedOverQuarantined = "directed-over-quarantined"
)

var mutationRules = []string{ruleQuarantineGrants, ruleWedgeOnEpochChange, ruleReplyAttempt, ruleCampaignFallback, ruleNoEpochSkip, ruleStandAside, ruleRenewalPatience, ruleNoCampaignHeard, ruleAdaptiveLead, ruleCleanStopWaits, ruleCarriedGrants, ruleHandOverRelease, ruleDirectedPatience, ruleAskAfterLapse, ruleQuarantinedYields, ruleRevokeLateGrants, ruleDirectedOverQuarantined}
