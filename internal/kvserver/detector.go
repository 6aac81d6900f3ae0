package kvserver

import (
	"errors"
	"fmt"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/detectors"
	"github.com/edictlog/edictlog/storage"
)

// paperDetector builds the weak leader election ProcessConfig.Detector
// names, among the processes of raft (this one included), tuned to the
// lease's round trip.
func (p *Process) paperDetector(raft map[edict.ProcessID]string) (elect.Detector, error) {
	lease := elect.Config{MaxLease: p.cfg.Lease}
	lease.ApplyDefaults()
	factory, err := detectors.New(p.cfg.Detector, detectors.Options{MaxDelay: lease.RoundTrip / 2, MaxLease: lease.MaxLease})
	if err != nil {
		return nil, fmt.Errorf("kvserver: %w", err)
	}
	members := []edict.ProcessID{p.cfg.ID}
	for id := range raft {
		if id != p.cfg.ID {
			members = append(members, id)
		}
	}
	slices.Sort(members)
	// The Node bumps the incarnation as it starts: name this start the
	// way its clock will, so that the algorithm's identifiers (Bully's
	// elections, for one) never repeat across restarts.
	inc := uint64(1)
	b, err := p.store.Get(storage.KeyIncarnation)
	switch {
	case err == nil:
		cur, err := storage.DecodeUint64(storage.KeyIncarnation, b)
		if err != nil {
			return nil, fmt.Errorf("kvserver: detector: %w", err)
		}
		inc = cur + 1
	case !errors.Is(err, storage.ErrNotFound):
		return nil, fmt.Errorf("kvserver: detector: %w", err)
	}
	return factory(p.cfg.ID, members, inc), nil
}
