// Package fieldcheck tests a hand-written equality (or encoding) against
// every field of a record type: a field added to the type and forgotten
// by it fails the test that uses it. Test code only; it imports the standard
// library alone, so the pure machines' tests may use it.
package fieldcheck

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var timeType = reflect.TypeFor[time.Time]()

// Check fills a T with a value in every field (every pointer set, every
// list one element long), then makes one variant per field, that field
// changed, and one per pointer and list set to nil and (lists) to empty.
// Over every pair of these values equal must agree with reflect.DeepEqual
// (so a nil list and an empty one differ), and a value must equal its
// deep copy.
func Check[T any](t *testing.T, equal func(a, b T) bool) {
	t.Helper()
	variants, paths := variantsOf[T](t)
	full := variants[0]
	for i, a := range variants {
		if !equal(a, deepCopy(a)) {
			t.Errorf("%T: the variant at %s differs from its own copy", full, names(reflect.TypeFor[T](), paths[i]))
		}
		for j, b := range variants[:i] {
			if equal(a, b) != reflect.DeepEqual(a, b) {
				t.Errorf("%T: the variants at %s and %s: equal says %t, reflect.DeepEqual %t", full,
					names(reflect.TypeFor[T](), paths[i]), names(reflect.TypeFor[T](), paths[j]), equal(a, b), reflect.DeepEqual(a, b))
			}
		}
	}
}

// Variants are the values Check compares: a T with a value in every
// field, then one per field changed and per pointer and list set to nil
// and to empty. A hand-written encoding is tested over them against the
// one it stands for, so that a field it forgets fails.
func Variants[T any](t testing.TB) []T {
	t.Helper()
	variants, _ := variantsOf[T](t)
	return variants
}

func variantsOf[T any](t testing.TB) ([]T, [][]int) {
	t.Helper()
	var full T
	fill(reflect.ValueOf(&full).Elem(), 1)
	variants := []T{full}
	paths := [][]int{nil}
	walk(reflect.TypeFor[T](), nil, func(path []int, change func(reflect.Value)) {
		changed := deepCopy(full)
		change(at(reflect.ValueOf(&changed).Elem(), path))
		if reflect.DeepEqual(full, changed) {
			t.Fatalf("%T: the change at %v changed nothing (the check is broken)", full, path)
		}
		variants, paths = append(variants, changed), append(paths, path)
	})
	return variants, paths
}

// WithStrings is v with every string in it set to s (an encoding's
// escaping tested in every field).
func WithStrings[T any](v T, s string) T {
	out := deepCopy(v)
	setStrings(reflect.ValueOf(&out).Elem(), s)
	return out
}

func setStrings(v reflect.Value, s string) {
	switch {
	case v.Type() == timeType:
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Pointer:
		if !v.IsNil() {
			setStrings(v.Elem(), s)
		}
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			setStrings(v.Index(i), s)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			setStrings(v.Field(i), s)
		}
	}
}

// walk calls visit with a change for every leaf of t and, for each pointer
// and list, a change to nil and (lists) to empty. A path step is a field
// index, or -1 for a pointer's or list's element.
func walk(t reflect.Type, path []int, visit func([]int, func(reflect.Value))) {
	here := append([]int(nil), path...)
	switch {
	case t == timeType:
		visit(here, func(v reflect.Value) { v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second))) })
	case t.Kind() == reflect.Pointer:
		visit(here, func(v reflect.Value) { v.Set(reflect.Zero(t)) })
		walk(t.Elem(), append(here, -1), visit)
	case t.Kind() == reflect.Slice:
		visit(here, func(v reflect.Value) { v.Set(reflect.Zero(t)) })
		visit(here, func(v reflect.Value) { v.Set(reflect.MakeSlice(t, 0, 0)) })
		walk(t.Elem(), append(here, -1), visit)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			walk(t.Field(i).Type, append(here, i), visit)
		}
	default:
		visit(here, func(v reflect.Value) { setLeaf(v, 2) })
	}
}

// at is the value at path in v.
func at(v reflect.Value, path []int) reflect.Value {
	for _, i := range path {
		switch {
		case i < 0 && v.Kind() == reflect.Pointer:
			v = v.Elem()
		case i < 0:
			v = v.Index(0)
		default:
			v = v.Field(i)
		}
	}
	return v
}

func names(t reflect.Type, path []int) string {
	s := t.Name()
	for _, i := range path {
		if i < 0 {
			t = t.Elem()
			s += "[]"
			continue
		}
		s += "." + t.Field(i).Name
		t = t.Field(i).Type
	}
	return s
}

// fill sets every leaf of v to a value derived from n.
func fill(v reflect.Value, n int) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Unix(int64(1_700_000_000+n), 0).UTC()))
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	default:
		setLeaf(v, n)
	}
}

func setLeaf(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprint("v", n))
	case reflect.Bool:
		v.SetBool(n%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	default:
		panic(fmt.Sprintf("fieldcheck: no leaf value for %s", v.Type()))
	}
}

// deepCopy copies v so that no pointer or list is shared.
func deepCopy[T any](v T) T {
	var out T
	copyInto(reflect.ValueOf(&out).Elem(), reflect.ValueOf(v))
	return out
}

func copyInto(dst, src reflect.Value) {
	switch {
	case src.Type() == timeType:
		dst.Set(src)
	case src.Kind() == reflect.Pointer:
		if !src.IsNil() {
			dst.Set(reflect.New(src.Type().Elem()))
			copyInto(dst.Elem(), src.Elem())
		}
	case src.Kind() == reflect.Slice:
		if !src.IsNil() {
			dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
			for i := range src.Len() {
				copyInto(dst.Index(i), src.Index(i))
			}
		}
	case src.Kind() == reflect.Struct:
		for i := range src.NumField() {
			copyInto(dst.Field(i), src.Field(i))
		}
	default:
		dst.Set(src)
	}
}
