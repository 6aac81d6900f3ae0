package wire_test

import (
	"strings"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// A snapshot header's addresses are those of the processes it names, each
// one usable, and bounded in all.
func TestSnapshotHeaderAddrsValidate(t *testing.T) {
	t.Parallel()
	header := func(addrs map[edict.ProcessID]string) wire.SnapshotHeader {
		return wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5),
			Members: []edict.ProcessID{1, 2, 5}, Learners: []edict.ProcessID{7}, Size: 10, Addrs: addrs}
	}
	for _, addrs := range []map[edict.ProcessID]string{nil, {}, {1: "a:1", 7: "b:7"}, {5: strings.Repeat("x", wire.MaxAddrLen)}} {
		h := header(addrs)
		if err := h.Validate(); err != nil {
			t.Errorf("%v: %v", addrs, err)
		}
	}
	many := header(nil)
	many.Learners = nil
	many.Addrs = map[edict.ProcessID]string{}
	for p := edict.ProcessID(100); len(many.Addrs)*wire.MaxAddrLen <= wire.MaxAddrsLen; p++ {
		many.Learners = append(many.Learners, p)
		many.Addrs[p] = strings.Repeat("x", wire.MaxAddrLen)
	}
	for _, c := range []struct {
		name string
		h    wire.SnapshotHeader
		want string
	}{
		{"a stranger's", header(map[edict.ProcessID]string{3: "c:3"}), "wire: snapshot address of p3, which is neither a member nor a learner"},
		{"an empty one", header(map[edict.ProcessID]string{7: ""}), "wire: snapshot address of p7: empty"},
		{"an overlong one", header(map[edict.ProcessID]string{1: strings.Repeat("x", wire.MaxAddrLen+1)}), "wire: snapshot address of p1: 513 bytes, limit 512"},
		{"too many bytes in all", many, "wire: snapshot addresses of 16896 bytes or more, limit 16384"},
	} {
		if err := c.h.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%s: Validate = %v, want %q", c.name, err, c.want)
		}
	}
}
