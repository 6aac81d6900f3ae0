package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
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
	// Failed counts streams that failed or were refused.
	Failed int `json:"failed"`
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
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "jepsen snapshot sent":
			if rec.Installed {
				out.Installed++
				out.InstalledTo[rec.Peer]++
			} else {
				out.Failed++
			}
		case "jepsen snapshot received":
			out.Received++
		}
	}
	return sc.Err()
}
