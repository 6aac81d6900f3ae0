package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/memberlist"
)

type nodeEventKind uint8

const (
	nodeJoin nodeEventKind = iota + 1
	nodeUpdate
	nodeLeave // left or declared dead
)

// nodeEvent is a copy of what memberlist told a delegate: memberlist owns
// the Node it passes and may change it after the call.
type nodeEvent struct {
	kind nodeEventKind
	name string
	addr string
	meta []byte
}

// eventDelegate forwards memberlist's membership events to the detector's
// loop. Memberlist calls it one event at a time; it waits for room in the
// channel (the loop only updates a map, so the wait is short) rather than
// lose an event, and stops waiting when the detector closes.
type eventDelegate struct {
	events chan<- nodeEvent
	stop   <-chan struct{}
}

func (e eventDelegate) push(kind nodeEventKind, n *memberlist.Node) {
	ev := nodeEvent{kind: kind, name: n.Name, addr: n.Address(), meta: bytes.Clone(n.Meta)}
	select {
	case e.events <- ev:
	case <-e.stop:
	}
}

func (e eventDelegate) NotifyJoin(n *memberlist.Node)   { e.push(nodeJoin, n) }
func (e eventDelegate) NotifyLeave(n *memberlist.Node)  { e.push(nodeLeave, n) }
func (e eventDelegate) NotifyUpdate(n *memberlist.Node) { e.push(nodeUpdate, n) }

// delegate gives memberlist this node's metadata. The detector carries no
// application data over gossip (messages travel on the transport), so the
// user-message hooks have nothing to do.
type delegate struct{ d *Detector }

// NodeMeta returns the metadata prepared by refreshMetaLocked; Encode has
// already checked it against memberlist.MetaMaxSize (memberlist panics on
// more).
func (g delegate) NodeMeta(limit int) []byte {
	b := *g.d.meta.Load()
	if len(b) > limit {
		return nil
	}
	return b
}

func (delegate) NotifyMsg([]byte)                    {}
func (delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (delegate) LocalState(bool) []byte              { return nil }
func (delegate) MergeRemoteState(buf []byte, _ bool) {}

// slogWriter routes memberlist's log.Logger output ("[LEVEL] memberlist:
// text") to slog at the matching level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	s := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, l := range memberlistLevels {
		if strings.HasPrefix(s, l.prefix) {
			level, s = l.level, strings.TrimSpace(s[len(l.prefix):])
			break
		}
	}
	w.l.Log(context.Background(), level, strings.TrimPrefix(s, "memberlist: "), "source", "memberlist")
	return len(p), nil
}

var memberlistLevels = []struct {
	prefix string
	level  slog.Level
}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}}
