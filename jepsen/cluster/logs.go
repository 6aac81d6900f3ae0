package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
)

// SnapshotCounts counts snapshot streams from the nodes' logs, where the
// fault hook of a jepsen build writes one line per stream sent ("jepsen
// snapshot sent", with the receiver's verdict) and per stream handed to
// the receiving Node ("jepsen snapshot received"). The logs outlive
// restarts, which the hook's own counters do not.
type SnapshotCounts struct {
	// Installed counts streams whose receiver reported the snapshot
	// installed; InstalledTo breaks them down by receiver.
	Installed   int         `json:"installed"`
	InstalledTo map[int]int `json:"installed_to,omitempty"`
	// Refused counts streams the receiver refused (a stream from a
	// process it does not grant to, or of an older reign, or not ahead of
	// its commit index); Failed the others that did not end installed
	// (unreachable, cut off, timed out).
	Refused int `json:"refused"`
	Failed  int `json:"failed"`
	// Received counts streams handed to a receiving Node.
	Received int `json:"received"`
}

// SnapshotCounts reads every node's log (added nodes too).
func (c *Cluster) SnapshotCounts() (SnapshotCounts, error) {
	out := SnapshotCounts{InstalledTo: map[int]int{}}
	var errs []error
	for _, n := range c.Nodes() {
		errs = append(errs, countSnapshots(n.LogPath, &out))
	}
	return out, errors.Join(errs...)
}

func countSnapshots(path string, out *SnapshotCounts) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // the cluster's own "###" lines, or a torn line
		}
		var rec struct {
			Msg       string `json:"msg"`
			Peer      int    `json:"peer"`
			Installed bool   `json:"installed"`
			Err       string `json:"err"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "jepsen snapshot sent":
			switch {
			case rec.Installed:
				out.Installed++
				out.InstalledTo[rec.Peer]++
			case strings.Contains(rec.Err, "rejected by receiver"): // transport.ErrSnapshotRejected
				out.Refused++
			default:
				out.Failed++
			}
		case "jepsen snapshot received":
			out.Received++
		}
	}
	return sc.Err()
}
