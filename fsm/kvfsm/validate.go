package kvfsm

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ErrInvalid is wrapped by every error about a malformed or invalid command,
// query or result: bad encoding, a violated limit, an empty key, a Txn
// writing one key twice. The edictkv server maps it to a client error.
var ErrInvalid = errors.New("invalid input")

// ErrDuplicateKey is wrapped (beside ErrInvalid) by the error for a Txn
// branch that writes one key twice.
var ErrDuplicateKey = errors.New("key written twice in one txn branch")

// invalid wraps err, which describes what is wrong, with ErrInvalid.
func invalid(what string, err error) error {
	return fmt.Errorf("fsm: %s: %w: %w", what, ErrInvalid, err)
}

// Validate checks that exactly one field is set and that the operation is
// valid: non-empty keys within MaxKeySize, known compare targets and
// relations, and no key written twice in a Txn branch. Apply refuses a
// command that fails it; EncodeCommand refuses to encode one. The error
// wraps ErrInvalid.
func (c *Command) Validate() error {
	if err := c.validate(); err != nil {
		return invalid("command", err)
	}
	return nil
}

func (c *Command) validate() error {
	switch n := countSet(c.Put != nil, c.Delete != nil, c.Range != nil, c.Txn != nil); {
	case n != 1:
		return fmt.Errorf("command sets %d of put, delete, range, txn; want exactly one", n)
	case c.Put != nil:
		return c.Put.validate()
	case c.Delete != nil:
		return c.Delete.validate()
	case c.Range != nil:
		return c.Range.validate()
	}
	return c.Txn.validate()
}

func (p *Put) validate() error {
	if err := checkKey(p.Key); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return nil
}

func (d *Delete) validate() error {
	if err := checkRange(d.Key, d.RangeEnd); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

func (r *Range) validate() error {
	if err := checkRange(r.Key, r.RangeEnd); err != nil {
		return fmt.Errorf("range: %w", err)
	}
	return nil
}

func (c *Compare) validate() error {
	if err := checkKey(c.Key); err != nil {
		return err
	}
	if c.Op < Equal || c.Op > Greater {
		return fmt.Errorf("unknown relation %v", c.Op)
	}
	switch c.Target {
	case TargetValue:
		if c.Number != 0 {
			return fmt.Errorf("value compare with a number operand %d", c.Number)
		}
	case TargetVersion, TargetCreateRevision, TargetModRevision:
		if c.Value != "" {
			return fmt.Errorf("%v compare with a value operand", c.Target)
		}
	default:
		return fmt.Errorf("unknown compare target %v", c.Target)
	}
	return nil
}

func (o *Op) validate() error {
	switch n := countSet(o.Put != nil, o.Delete != nil, o.Range != nil); {
	case n != 1:
		return fmt.Errorf("op sets %d of put, delete, range; want exactly one", n)
	case o.Put != nil:
		return o.Put.validate()
	case o.Delete != nil:
		return o.Delete.validate()
	}
	return o.Range.validate()
}

func (t *Txn) validate() error {
	for i := range t.Compares {
		if err := t.Compares[i].validate(); err != nil {
			return fmt.Errorf("txn: compare %d: %w", i, err)
		}
	}
	for _, b := range []struct {
		name string
		ops  []Op
	}{{"success", t.Success}, {"failure", t.Failure}} {
		for i := range b.ops {
			if err := b.ops[i].validate(); err != nil {
				return fmt.Errorf("txn: %s op %d: %w", b.name, i, err)
			}
		}
		if err := checkWritesOnce(b.ops); err != nil {
			return fmt.Errorf("txn: %s: %w", b.name, err)
		}
	}
	return nil
}

// checkWritesOnce refuses a branch that writes one key twice, as etcd does
// (ErrGRPCDuplicateKey): two Puts of a key, or a Put of a key that a Delete
// in the branch covers. Two Deletes may overlap. It sorts the put keys and
// binary-searches each delete range, so a large branch costs O(n log n).
func checkWritesOnce(ops []Op) error {
	var puts []string
	var dels []*Delete
	for i := range ops {
		switch {
		case ops[i].Put != nil:
			puts = append(puts, ops[i].Put.Key)
		case ops[i].Delete != nil:
			dels = append(dels, ops[i].Delete)
		}
	}
	if len(puts) == 0 || len(puts)+len(dels) < 2 {
		return nil
	}
	slices.Sort(puts)
	for i := 1; i < len(puts); i++ {
		if puts[i] == puts[i-1] {
			return fmt.Errorf("%w: key %q is put twice", ErrDuplicateKey, puts[i])
		}
	}
	for _, d := range dels {
		j := sort.SearchStrings(puts, d.Key)
		if j < len(puts) && inRange(d.Key, d.RangeEnd, puts[j]) {
			return fmt.Errorf("%w: key %q is both put and deleted", ErrDuplicateKey, puts[j])
		}
	}
	return nil
}

func checkKey(k string) error {
	switch {
	case k == "":
		return errors.New("empty key")
	case len(k) > MaxKeySize:
		return fmt.Errorf("key of %d bytes exceeds the limit of %d", len(k), MaxKeySize)
	}
	return nil
}

func checkRange(key, end string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(end) > MaxKeySize {
		return fmt.Errorf("range end of %d bytes exceeds the limit of %d", len(end), MaxKeySize)
	}
	return nil
}

func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}
