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

// tailLines is how many of a node's last log lines a start failure or an
// exit quotes.
const tailLines = 4

// LogTail is the last lines (at most n) node id's current or last process
// wrote to its log, on one line, each cut to a few hundred bytes: what a
// process that could not start said last.
func (c *Cluster) LogTail(id, n int) string {
	node := c.Node(id)
	if node == nil {
		return ""
	}
	return logTail(node.LogPath, n)
}

// logTailBytes bounds how much of a log's end logTail reads.
const logTailBytes = 64 << 10

// logTail reads the end of the log at path and returns its last n lines
// written since the last start (the cluster's "### cluster: starting"
// line), the cluster's own "###" lines left out, joined with " | ".
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-logTailBytes, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // a line cut by the read's start
	}
	if i := lastIndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "### cluster: starting node") }); i >= 0 {
		lines = lines[i+1:]
	}
	var out []string
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "### cluster: ") {
			continue
		}
		if len(l) > 400 {
			l = l[:400] + "…"
		}
		out = append(out, l)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}

func lastIndexFunc(s []string, f func(string) bool) int {
	for i := len(s) - 1; i >= 0; i-- {
		if f(s[i]) {
			return i
		}
	}
	return -1
}
