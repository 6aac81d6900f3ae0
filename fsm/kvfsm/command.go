package kvfsm

import "strconv"

// The KV command set follows etcd v3 (PutRequest, DeleteRangeRequest,
// RangeRequest, TxnRequest) so that the etcd API can be served on top of it
// without translation of semantics. Keys and values are strings rather than
// []byte: Go strings hold arbitrary bytes, and being immutable they can be
// shared between the tree, snapshots being written and results handed to
// callers without defensive copies.

// Put sets Key to Value (etcd PutRequest).
type Put struct {
	Key   string `codec:"k"`
	Value string `codec:"v,omitempty"`
	// PrevKV asks for the key's previous state in the result.
	PrevKV bool `codec:"p,omitempty"`
}

// Delete deletes Key, or the keys in [Key, RangeEnd) when RangeEnd is set,
// with etcd's range conventions (see Range).
type Delete struct {
	Key      string `codec:"k"`
	RangeEnd string `codec:"e,omitempty"`
	// PrevKV asks for the deleted keys' states in the result.
	PrevKV bool `codec:"p,omitempty"`
}

// Range reads Key, or the keys in [Key, RangeEnd), in key order.
//
// As in etcd: an empty RangeEnd means the single key Key; RangeEnd "\x00"
// means every key ≥ Key (with Key "\x00" too, every key); PrefixEnd(p) as
// RangeEnd with Key p means every key with prefix p. A RangeEnd ≤ Key
// selects nothing.
type Range struct {
	Key      string `codec:"k"`
	RangeEnd string `codec:"e,omitempty"`
	// Limit caps the number of keys returned; 0 means no cap. Count still
	// reports every key in the range, and More says some were left out.
	Limit uint64 `codec:"l,omitempty"`
	// CountOnly returns only the count.
	CountOnly bool `codec:"c,omitempty"`
	// KeysOnly returns the keys without their values.
	KeysOnly bool `codec:"o,omitempty"`
}

// CompareTarget is the property of a key a Compare looks at. The zero value
// is invalid, so that a Compare whose target was forgotten is refused.
type CompareTarget uint8

// The targets, as in etcd's Compare.target.
const (
	TargetValue          CompareTarget = iota + 1 // compare Value with Compare.Value
	TargetVersion                                 // compare Version with Compare.Number
	TargetCreateRevision                          // compare CreateRevision with Compare.Number
	TargetModRevision                             // compare ModRevision with Compare.Number
)

func (t CompareTarget) String() string {
	switch t {
	case TargetValue:
		return "value"
	case TargetVersion:
		return "version"
	case TargetCreateRevision:
		return "create_revision"
	case TargetModRevision:
		return "mod_revision"
	}
	return "target(" + strconv.Itoa(int(t)) + ")"
}

// CompareOp is a Compare's relation. The zero value is invalid.
type CompareOp uint8

// The relations, as in etcd's Compare.result: the key's property is on the
// left, the operand on the right. Values compare bytewise.
const (
	Equal CompareOp = iota + 1
	NotEqual
	Less
	Greater
)

func (o CompareOp) String() string {
	switch o {
	case Equal:
		return "="
	case NotEqual:
		return "!="
	case Less:
		return "<"
	case Greater:
		return ">"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Compare is a condition of a Txn: Key's Target, related by Op to the
// operand (Value for TargetValue, Number otherwise).
//
// As in etcd, a missing key has Version, CreateRevision and ModRevision 0,
// and every value compare on a missing key is false, != included: there is
// no value to compare.
type Compare struct {
	Key    string        `codec:"k"`
	Target CompareTarget `codec:"t"`
	Op     CompareOp     `codec:"o"`
	Value  string        `codec:"v,omitempty"`
	Number uint64        `codec:"n,omitempty"`
}

// Op is one operation of a Txn branch: exactly one field is set.
type Op struct {
	Put    *Put    `codec:"p,omitempty"`
	Delete *Delete `codec:"d,omitempty"`
	Range  *Range  `codec:"r,omitempty"`
}

// Txn evaluates every Compare against the state before the transaction; if
// all hold it runs Success, else Failure. The whole transaction is one log
// entry and is applied atomically; its writes share the entry's revision,
// and a Range in a branch sees the branch's earlier writes. As in etcd, a
// branch may not write one key twice (two Puts, or a Put and a Delete that
// covers it).
type Txn struct {
	Compares []Compare `codec:"c,omitempty"`
	Success  []Op      `codec:"s,omitempty"`
	Failure  []Op      `codec:"f,omitempty"`
}

// Command is one KV command, the Data of a log entry: exactly one field is
// set. Range is allowed as a command so that a read can be ordered through
// the log when no cheaper linearizable read is available.
type Command struct {
	Put    *Put    `codec:"p,omitempty"`
	Delete *Delete `codec:"d,omitempty"`
	Range  *Range  `codec:"r,omitempty"`
	Txn    *Txn    `codec:"t,omitempty"`
}

// CASValue builds a compare-and-swap by value: set key to newValue if its
// value is old. A missing key fails the compare (etcd semantics). On
// failure the transaction reads the key, so the caller learns the current
// state without another round trip.
func CASValue(key, old, newValue string) Command {
	return cas(key, Compare{Key: key, Target: TargetValue, Op: Equal, Value: old}, newValue)
}

// CASIndex builds a compare-and-swap by modification index: set key to
// newValue if its ModRevision is modIndex. modIndex 0 means "create only":
// the key must not exist (CreateRevision = 0). On failure the transaction
// reads the key.
func CASIndex(key string, modIndex uint64, newValue string) Command {
	c := Compare{Key: key, Target: TargetModRevision, Op: Equal, Number: modIndex}
	if modIndex == 0 {
		c.Target = TargetCreateRevision
	}
	return cas(key, c, newValue)
}

func cas(key string, c Compare, newValue string) Command {
	return Command{Txn: &Txn{
		Compares: []Compare{c},
		Success:  []Op{{Put: &Put{Key: key, Value: newValue}}},
		Failure:  []Op{{Range: &Range{Key: key}}},
	}}
}

// SystemPrefix starts the keys a server built on KV keeps for itself
// (edictkv's registry of process addresses). A multi-key Range or Delete
// leaves them out unless its own Key starts with SystemPrefix: a client
// that deletes "every key" or counts them does not touch or see the
// server's records. Single-key operations reach them; a server refuses
// such keys from its clients.
const SystemPrefix = "\x00edictkv/"

// PrefixEnd returns the RangeEnd that, with Key prefix, selects every key
// starting with prefix (etcd's GetPrefixRangeEnd): prefix with its last
// byte below 0xff incremented and the 0xff bytes after it dropped. A prefix
// of only 0xff bytes (or empty) yields "\x00", every key ≥ Key.
func PrefixEnd(prefix string) string {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			return prefix[:i] + string([]byte{prefix[i] + 1})
		}
	}
	return "\x00"
}

// inRange reports whether key is selected by [start, end) under etcd's
// conventions.
func inRange(start, end, key string) bool {
	switch end {
	case "":
		return key == start
	case "\x00":
		return key >= start
	}
	return key >= start && key < end
}
