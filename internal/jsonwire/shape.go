package jsonwire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// kind is what a Shape accepts besides null.
type kind uint8

const (
	kindAny    kind = iota // json.RawMessage: any value
	kindString             // a string
	kindBool               // true or false
	kindInt                // an integral number that fits bits
	kindUint               // a non-negative integral number that fits bits
	kindFloat              // a number that fits bits
	kindSlice              // an array of elem
	kindStruct             // an object whose known keys fit their fields
	kindMap                // an object whose every value fits elem
	kindUnion              // one of the alternatives, chosen by the value's JSON kind
)

// Shape is the shape of a Go type as encoding/json decodes into it.
//
// A Shape is built once from a Go type by reflection, so it cannot drift
// from the type the document is later decoded into. It follows
// encoding/json's rules: null fits every type, object keys match field
// names exactly or else case-insensitively (bytes.EqualFold), unknown keys
// are ignored, every occurrence of a duplicated key must fit, integers must
// be integral and in range, floats in range, and json.RawMessage takes
// anything. Fields that the decoder takes raw and reads later (a content
// that is a string or an array of parts) are described with Union and
// Hook.
type Shape struct {
	kind kind
	bits int
	name string // the Go type, for errors
	elem *Shape // kindSlice, kindMap

	fields []field // kindStruct
	hook   func(Object) error
	// track is set on structs whose fields' kept occurrences are noted
	// while reading: for deferred fields and hooks.
	track bool

	// kindUnion: the alternative for each JSON kind; nil refuses the kind.
	str, arr, obj, num, boolean *Shape
	// deferred is set on unions: only the last occurrence of a raw field
	// counts, as the decoder keeps only that one.
	deferred bool
}

// field is one decodable field of a struct.
type field struct {
	name  string
	shape *Shape
	// raw fields (json.RawMessage, interfaces) keep their last
	// occurrence, null included; typed fields keep their last non-null one.
	raw bool
}

// Option adjusts how Of describes a type.
type Option func(*builder)

// Union makes the json.RawMessage field jsonName of struct type in accept
// null or a value that decodes into one of alternatives, each of a
// different JSON kind (string, array, object, number, bool): for content
// that is "a string or an array of parts". Only the field's last
// occurrence is checked, as it is the one the decoder keeps.
func Union(in reflect.Type, jsonName string, alternatives ...reflect.Type) Option {
	return func(b *builder) {
		b.unions[fieldKey{in, jsonName}] = alternatives
	}
}

// Hook runs check after every object of struct type in is read, with the
// object's fields: for a field whose shape depends on another one (the
// content of an item whose type says it is read). check may call Check
// on a field with another Shape.
func Hook(in reflect.Type, check func(Object) error) Option {
	return func(b *builder) { b.hooks[in] = check }
}

type fieldKey struct {
	in   reflect.Type
	name string
}

type builder struct {
	done   map[reflect.Type]*Shape
	unions map[fieldKey][]reflect.Type
	hooks  map[reflect.Type]func(Object) error
}

var rawMessage = reflect.TypeFor[json.RawMessage]()
var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// Of returns the shape of t. It panics on a type encoding/json decodes in
// a way Shape does not model (custom unmarshalers other than
// json.RawMessage, embedded structs, fixed-size arrays, ",string"
// fields, interfaces, which decode numbers into float64): shapes are
// built once, at start-up, from fixed types.
func Of(t reflect.Type, opts ...Option) *Shape {
	b := newBuilder(opts)
	return b.shape(t)
}

func newBuilder(opts []Option) *builder {
	b := &builder{
		done:   make(map[reflect.Type]*Shape),
		unions: make(map[fieldKey][]reflect.Type),
		hooks:  make(map[reflect.Type]func(Object) error),
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

func (b *builder) shape(t reflect.Type) *Shape {
	if s, ok := b.done[t]; ok {
		return s
	}
	s := &Shape{name: t.String()}
	b.done[t] = s // before recursing: a type may contain itself
	switch {
	case t == rawMessage:
		s.kind = kindAny
		return s
	case t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler):
		panic("jsonwire: " + t.String() + " has its own UnmarshalJSON")
	}
	switch t.Kind() {
	case reflect.Pointer:
		delete(b.done, t)
		e := b.shape(t.Elem())
		b.done[t] = e
		return e
	case reflect.String:
		s.kind = kindString
	case reflect.Bool:
		s.kind = kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.kind, s.bits = kindInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.kind, s.bits = kindUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		s.kind, s.bits = kindFloat, t.Bits()
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			panic("jsonwire: " + t.String() + " decodes from base64")
		}
		s.kind, s.elem = kindSlice, b.shape(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic("jsonwire: " + t.String() + " has non-string keys")
		}
		s.kind, s.elem = kindMap, b.shape(t.Elem())
	case reflect.Struct:
		s.kind = kindStruct
		s.hook = b.hooks[t]
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				panic("jsonwire: " + t.String() + " embeds " + f.Name)
			}
			name, opts, decoded := jsonField(f)
			if !decoded {
				continue
			}
			if strings.Contains(","+opts+",", ",string,") {
				panic("jsonwire: " + t.String() + "." + f.Name + " uses the string option")
			}
			fs := b.shape(f.Type)
			raw := fs.kind == kindAny
			if alts, ok := b.unions[fieldKey{t, name}]; ok {
				if f.Type != rawMessage {
					panic("jsonwire: union field " + t.String() + "." + f.Name + " is not a json.RawMessage")
				}
				fs = b.union(name, alts)
			}
			s.fields = append(s.fields, field{name: name, shape: fs, raw: raw})
		}
		for _, f := range s.fields {
			s.track = s.track || f.shape.deferred
		}
		s.track = s.track || s.hook != nil
	default:
		panic("jsonwire: cannot describe " + t.String())
	}
	return s
}

func (b *builder) union(name string, alts []reflect.Type) *Shape {
	u := &Shape{kind: kindUnion, deferred: true}
	var names []string
	for _, t := range alts {
		a := b.shape(t)
		var slot **Shape
		switch a.kind {
		case kindString:
			slot = &u.str
		case kindSlice:
			slot = &u.arr
		case kindStruct, kindMap:
			slot = &u.obj
		case kindInt, kindUint, kindFloat:
			slot = &u.num
		case kindBool:
			slot = &u.boolean
		default:
			panic("jsonwire: union " + name + " alternative " + t.String() + " has no single JSON kind")
		}
		if *slot != nil {
			panic("jsonwire: union " + name + " has two alternatives of one JSON kind")
		}
		*slot = a
		names = append(names, jsonKindName(a.kind))
	}
	u.name = strings.Join(names, " or ")
	return u
}

func jsonKindName(k kind) string {
	switch k {
	case kindString:
		return "a string"
	case kindSlice:
		return "an array"
	case kindStruct, kindMap:
		return "an object"
	case kindInt, kindUint, kindFloat:
		return "a number"
	case kindBool:
		return "a boolean"
	}
	return "a value"
}

// Error is a document that is not valid JSON or does not fit the shape.
type Error struct {
	// Offset is the byte offset of the problem.
	Offset int
	// Path is where in the document, e.g. messages[2].content; empty at
	// the top level and for syntax errors, whose offset says where.
	Path string
	// Syntax is set when the document is not valid JSON.
	Syntax bool
	// Msg says what is wrong, in JSON's words ("want an array, got a
	// number"), never naming a Go type.
	Msg string
}

func (e *Error) Error() string {
	where := fmt.Sprintf("at offset %d", e.Offset)
	if e.Path != "" {
		where = e.Path + " (" + where + ")"
	}
	if e.Syntax {
		return "invalid JSON " + where + ": " + e.Msg
	}
	return where + ": " + e.Msg
}

// OneOf is the shape of a value that is null or decodes into one of
// alternatives, each of a different JSON kind: what Union gives a field,
// for a Hook to check a field against.
func OneOf(alternatives []reflect.Type, opts ...Option) *Shape {
	b := newBuilder(opts)
	return b.union("value", alternatives)
}

// jsonField returns the JSON name and the options of a struct field as
// encoding/json reads its tag; decoded is false for a field it leaves
// alone (unexported, or tagged "-").
func jsonField(f reflect.StructField) (name, opts string, decoded bool) {
	tag := f.Tag.Get("json")
	if !f.IsExported() || tag == "-" {
		return "", "", false
	}
	name, opts, _ = strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, opts, true
}
