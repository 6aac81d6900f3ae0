package edictlogtest

import (
	"fmt"
	"reflect"

	"github.com/edictlog/edictlog/wire"
)

// cloneMessage returns a deep copy of m: no slice, map or pointer of the
// copy shares memory with m. A transport that encodes gives every
// receiver its own copy and lets the sender reuse its payload once Send
// returns; copying is how this one keeps that promise without an
// encoding. It copies by reflection so that fields added to the messages
// later are copied too (TestCloneIsDeep checks that every field is
// reachable: no unexported reference fields).
func cloneMessage(m wire.Message) wire.Message {
	var out wire.Message
	deepCopy(refValue(&out), refValueOf(m))
	return out
}

func refValue[T any](p *T) reflect.Value  { return reflect.ValueOf(p).Elem() }
func refValueOf[T any](v T) reflect.Value { return reflect.ValueOf(&v).Elem() }

// deepCopy sets dst, settable and of src's type, to a deep copy of src.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		if src.Type().Elem().Kind() == reflect.Uint8 {
			reflect.Copy(s, src)
		} else {
			for i := range src.Len() {
				deepCopy(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			k := reflect.New(src.Type().Key()).Elem()
			deepCopy(k, it.Key())
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(k, v)
		}
		dst.Set(m)
	case reflect.Array:
		for i := range src.Len() {
			deepCopy(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		// Unexported fields are copied as they are; TestCloneIsDeep
		// keeps reference types out of them.
		dst.Set(src)
		t := src.Type()
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Interface:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		panic(fmt.Sprintf("edictlogtest: cannot copy a %v in a message", src.Type()))
	default:
		dst.Set(src)
	}
}
