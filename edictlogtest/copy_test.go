package edictlogtest

import (
	"reflect"
	"testing"

	"github.com/edictlog/edictlog/wire"
)

// fill sets every field reachable from v to something other than its
// zero value: slices of two, maps of one, pointers to filled values.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.String:
		v.SetString("x")
	}
}

// shared reports a path at which a and b share memory.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if p := shared(a.Index(i), b.Index(i), path+"[i]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		it := a.MapRange()
		for it.Next() {
			if p := shared(it.Value(), b.MapIndex(it.Key()), path+"[k]"); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Array:
		for i := range a.Len() {
			if p := shared(a.Index(i), b.Index(i), path+"[i]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// unexportedRefs reports an unexported field reachable from t that holds
// a reference, which deepCopy cannot copy.
func unexportedRefs(t reflect.Type, seen map[reflect.Type]bool, path string) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unexportedRefs(t.Elem(), seen, path+"[]")
	case reflect.Map:
		if p := unexportedRefs(t.Key(), seen, path+"[key]"); p != "" {
			return p
		}
		return unexportedRefs(t.Elem(), seen, path+"[value]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && hasRefs(f.Type, map[reflect.Type]bool{}) {
				return path + "." + f.Name
			}
			if p := unexportedRefs(f.Type, seen, path+"."+f.Name); p != "" {
				return p
			}
		}
	}
	return ""
}

func hasRefs(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasRefs(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if hasRefs(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// Every field of every message, present and future, is copied: a copy
// shares no memory with its original.
func TestCloneIsDeep(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[wire.Message](), reflect.TypeFor[wire.SnapshotHeader]()} {
		if p := unexportedRefs(typ, map[reflect.Type]bool{}, typ.Name()); p != "" {
			t.Fatalf("%s is an unexported field holding a reference: the in-memory transport's copy would share it", p)
		}
	}
	var m wire.Message
	fill(reflect.ValueOf(&m).Elem(), 0)
	cp := cloneMessage(m)
	if !reflect.DeepEqual(m, cp) {
		t.Fatal("the copy differs from the message")
	}
	if p := shared(reflect.ValueOf(m), reflect.ValueOf(cp), "Message"); p != "" {
		t.Fatalf("the copy shares %s with the message", p)
	}
	var h wire.SnapshotHeader
	fill(reflect.ValueOf(&h).Elem(), 0)
	hc := cloneHeader(h)
	if !reflect.DeepEqual(h, hc) {
		t.Fatal("the header's copy differs")
	}
	if p := shared(reflect.ValueOf(h), reflect.ValueOf(hc), "SnapshotHeader"); p != "" {
		t.Fatalf("the header's copy shares %s", p)
	}
}
