package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/memberlist"
)

// Config configures a Detector. Zero durations take the defaults named on
// each field.
type Config struct {
	// ID is this process. Required.
	ID edict.ProcessID
	// Clock is this process's clock: the one the At of its observations
	// and the now of WeakLeader are read from. The detector reads it to
	// stop advertising a leader hint that has expired. Required.
	Clock edict.Clock
	// ClusterID labels every gossip packet (memberlist's Label): nodes of
	// another cluster are not heard. Required, at most 200 bytes.
	ClusterID string
	// Epoch and Members are the current epoch and its members. Only a
	// member of Members that gossips Epoch can be the weak leader. An empty
	// Members admits every node that gossips Epoch.
	Epoch   uint64
	Members []edict.ProcessID
	// BindAddr is the gossip address (UDP and TCP on one port); port 0
	// picks a free one. Required.
	BindAddr string
	// AdvertiseAddr is the address others should use, if not BindAddr's.
	AdvertiseAddr string
	// Join lists gossip addresses of other members. They are joined at
	// start and, while any of them is not a live member, again every
	// RejoinInterval: memberlist on its own never re-contacts a node it
	// declared dead, so without this two sides of a long partition would
	// stay apart after it heals.
	Join           []string
	RejoinInterval time.Duration // default 5s
	// TransportAddr and APIAddr are advertised in the metadata.
	TransportAddr string
	APIAddr       string
	// ClusterKey, if set, encrypts gossip (AES-GCM; 16, 24 or 32 bytes).
	// Nodes without the key are not heard, nor do they hear us.
	ClusterKey []byte
	// LeaderHintTTL is how long a LeaderSeen observation keeps a process
	// the weak leader against lower ids, and how long this node advertises
	// it as leader (default 2s; a lease length is a good choice).
	LeaderHintTTL time.Duration
	// Logger receives detector and memberlist events; slog.Default() if nil.
	Logger *slog.Logger
	// Tune, if set, is applied to the memberlist configuration last, e.g.
	// memberlist.DefaultWANConfig timings for a wide-area cluster.
	Tune func(*memberlist.Config)
}

// Timing chosen so that a crashed node is declared dead in well under two
// seconds on a LAN or loopback, starting from memberlist.DefaultLocalConfig:
//
//   - ProbeInterval 200ms, ProbeTimeout 100ms: each node probes one other
//     every 200ms, so with n nodes someone probes the dead one within about
//     200ms·(n-1)/(n-1) on average; a probe fails 200ms after it starts.
//   - SuspicionMult 3 with SuspicionMaxTimeoutMult 2: a suspect is declared
//     dead after 600ms once one other node confirms the suspicion (1.2s
//     without confirmation). Lower multipliers declare healthy but slow
//     nodes dead under load; the suspect gets these 600ms to refute.
//   - GossipInterval 50ms to 3 nodes: the verdict spreads in ~100ms.
//   - AwarenessMaxMultiplier 4: a node that finds itself slow (Lifeguard)
//     backs off probing at most to 800ms, not 1.6s.
//
// Expected detection: ~0.2s to the first failed probe, 0.6–1.2s of
// suspicion, ~0.1s to spread: about 1–1.5s. The test
// TestKilledLeaderReplacedWithinTwoSeconds measures it.
func memberlistConfig(c *Config) *memberlist.Config {
	mc := memberlist.DefaultLocalConfig()
	mc.ProbeInterval = 200 * time.Millisecond
	mc.ProbeTimeout = 100 * time.Millisecond
	mc.SuspicionMult = 3
	mc.SuspicionMaxTimeoutMult = 2
	mc.IndirectChecks = 2
	mc.GossipInterval = 50 * time.Millisecond
	mc.GossipNodes = 3
	mc.RetransmitMult = 3
	mc.AwarenessMaxMultiplier = 4
	mc.PushPullInterval = 10 * time.Second
	mc.GossipToTheDeadTime = 5 * time.Second
	mc.TCPTimeout = time.Second
	// A restarted process comes back under the same name, often at a new
	// port; let it take over its dead predecessor's entry.
	mc.DeadNodeReclaimTime = time.Second
	return mc
}

func (c *Config) withDefaults() (Config, error) {
	d := *c
	switch {
	case d.ID == edict.None:
		return d, errors.New("gossip: Config.ID is required")
	case d.Clock == nil:
		return d, errors.New("gossip: Config.Clock is required")
	case d.ClusterID == "" || len(d.ClusterID) > 200:
		return d, errors.New("gossip: Config.ClusterID must be 1 to 200 bytes")
	case d.BindAddr == "":
		return d, errors.New("gossip: Config.BindAddr is required")
	}
	if n := len(d.ClusterKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return d, fmt.Errorf("gossip: Config.ClusterKey of %d bytes; want 16, 24 or 32", n)
	}
	if d.RejoinInterval <= 0 {
		d.RejoinInterval = 5 * time.Second
	}
	if d.LeaderHintTTL <= 0 {
		d.LeaderHintTTL = 2 * time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d, nil
}

// splitHostPort parses a host:port with a numeric port.
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("gossip: address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("gossip: address %q: bad port", addr)
	}
	return host, int(port), nil
}

// nodeName is the memberlist name of a process: its id in decimal.
func nodeName(id edict.ProcessID) string { return strconv.FormatUint(uint64(id), 10) }
