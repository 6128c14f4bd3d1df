package jsonwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// maxDepth is encoding/json's nesting limit: deeper documents are invalid.
const maxDepth = 10000

// anyShape accepts any valid value.
var anyShape = &Shape{kind: kindAny, name: "json.RawMessage"}

// Check reports whether b is one valid JSON value that encoding/json
// decodes into the shape's type without an error. The error, an *Error,
// says where the first problem is.
func (s *Shape) Check(b []byte) error {
	c := checker{b: b}
	c.path, c.kept = c.pathBuf[:0], c.keptBuf[:0]
	c.skipSpace()
	c.value(s)
	if c.err == nil {
		c.skipSpace()
		if c.i < len(c.b) {
			c.syntax("invalid character " + quoteChar(c.b[c.i]) + " after the top-level value")
		}
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

// checker reads one document. It stops at the first syntax error, and at
// the first type error unless soft: inside an occurrence of a deferred
// field, whose errors count only if it turns out to be the last one.
type checker struct {
	b     []byte
	i     int
	depth int
	err   *Error

	soft    bool
	softErr *Error

	path    []pathElem
	pathBuf [32]pathElem
	// kept holds, for each tracked object being read, the occurrence of
	// each field the decoder keeps: a stack, reused across objects.
	kept    []kept
	keptBuf [32]kept
}

// pathElem is a field name or, when name is "", an array index.
type pathElem struct {
	name  string
	index int
}

func (c *checker) pathString() string {
	var sb strings.Builder
	for _, p := range c.path {
		if p.name == "" {
			sb.WriteString("[" + strconv.Itoa(p.index) + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(p.name)
	}
	return sb.String()
}

func (c *checker) syntax(msg string) {
	if c.err == nil {
		c.err = &Error{Offset: c.i, Syntax: true, Msg: msg} // the offset says where
	}
}

// mismatch notes a value of the wrong type at offset at.
func (c *checker) mismatch(at int, want *Shape, got string) {
	c.fail(&Error{Offset: at, Path: c.pathString(), Msg: "want " + want.describe() + ", got " + got})
}

func (c *checker) fail(e *Error) {
	if c.soft {
		if c.softErr == nil {
			c.softErr = e
		}
		return
	}
	if c.err == nil {
		c.err = e
	}
}

// describe says what s accepts in the words of JSON, for the people who
// sent the document: it names no Go type.
func (s *Shape) describe() string {
	switch s.kind {
	case kindUnion:
		return s.name
	case kindInt, kindUint:
		return fmt.Sprintf("an integer that fits in %d bits", s.bits)
	case kindFloat:
		return "a number in range"
	}
	return jsonKindName(s.kind)
}

func (c *checker) skipSpace() { c.i = skipSpace(c.b, c.i) }

// value reads the value at c.i as s.
func (c *checker) value(s *Shape) {
	if c.i >= len(c.b) {
		c.syntax("unexpected end of JSON input")
		return
	}
	start := c.i
	ch := c.b[c.i]
	if s.kind == kindUnion {
		var alt *Shape
		got := ""
		switch {
		case ch == '"':
			alt, got = s.str, "a string"
		case ch == '[':
			alt, got = s.arr, "an array"
		case ch == '{':
			alt, got = s.obj, "an object"
		case ch == 't' || ch == 'f':
			alt, got = s.boolean, "a boolean"
		case ch == '-' || ('0' <= ch && ch <= '9'):
			alt, got = s.num, "a number"
		case ch == 'n':
			alt = anyShape
		}
		if alt == nil && got != "" {
			c.mismatch(start, s, got)
			alt = anyShape
		}
		if alt != nil {
			s = alt
		}
	}
	switch {
	case ch == '{':
		switch s.kind {
		case kindStruct, kindMap, kindAny:
			c.object(s)
		default:
			c.mismatch(start, s, "an object")
			c.object(anyShape)
		}
	case ch == '[':
		switch s.kind {
		case kindSlice:
			c.array(s.elem)
		case kindAny:
			c.array(anyShape)
		default:
			c.mismatch(start, s, "an array")
			c.array(anyShape)
		}
	case ch == '"':
		c.string()
		if s.kind != kindString && s.kind != kindAny {
			c.mismatch(start, s, "a string")
		}
	case ch == 't':
		c.literal("true")
		c.boolean(start, s)
	case ch == 'f':
		c.literal("false")
		c.boolean(start, s)
	case ch == 'n':
		c.literal("null") // null fits every type
	case ch == '-' || ('0' <= ch && ch <= '9'):
		c.number(start, s)
	default:
		c.syntax("invalid character " + quoteChar(ch) + " looking for beginning of value")
	}
}

func (c *checker) boolean(start int, s *Shape) {
	if c.err == nil && s.kind != kindBool && s.kind != kindAny {
		c.mismatch(start, s, "a boolean")
	}
}

func (c *checker) literal(lit string) {
	if !bytes.HasPrefix(c.b[c.i:], []byte(lit)) {
		for k := 0; k < len(lit); k++ {
			if c.i+k >= len(c.b) {
				c.i += k
				c.syntax("unexpected end of JSON input")
				return
			}
			if c.b[c.i+k] != lit[k] {
				c.i += k
				c.syntax("invalid character " + quoteChar(c.b[c.i]) + " in literal " + lit)
				return
			}
		}
	}
	c.i += len(lit)
}

// number reads a number and checks that it fits s.
func (c *checker) number(start int, s *Shape) {
	b := c.b
	i := c.i
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		c.i = i
		c.numberEnd("in numeric literal")
		return
	}
	integral := true
	if i < len(b) && b[i] == '.' {
		integral = false
		i++
		if !digits() {
			c.i = i
			c.numberEnd("after decimal point in numeric literal")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integral = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			c.i = i
			c.numberEnd("in exponent of numeric literal")
			return
		}
	}
	c.i = i
	text := unsafe.String(&b[start], i-start)
	switch s.kind {
	case kindAny:
	case kindInt:
		if !integral {
			c.mismatch(start, s, "the number "+text)
		} else if _, err := strconv.ParseInt(text, 10, s.bits); err != nil {
			c.mismatch(start, s, "the number "+text)
		}
	case kindUint:
		if !integral {
			c.mismatch(start, s, "the number "+text)
		} else if _, err := strconv.ParseUint(text, 10, s.bits); err != nil {
			c.mismatch(start, s, "the number "+text)
		}
	case kindFloat:
		if _, err := strconv.ParseFloat(text, s.bits); err != nil {
			c.mismatch(start, s, "the number "+text)
		}
	default:
		c.mismatch(start, s, "a number")
	}
}

func (c *checker) numberEnd(where string) {
	if c.i >= len(c.b) {
		c.syntax("unexpected end of JSON input")
		return
	}
	c.syntax("invalid character " + quoteChar(c.b[c.i]) + " " + where)
}

// string reads a string. Strings are most of a request's bytes, so the
// quote, backslash and control-byte searches each cover a byte once,
// eight bytes at a time or faster.
func (c *checker) string() {
	b := c.b
	i := c.i + 1
	q := -1 // the next '"' at or after i, once found
	for {
		if q < i {
			k := bytes.IndexByte(b[i:], '"')
			if k < 0 {
				if ctl := indexControl(b[i:]); ctl >= 0 {
					c.i = i + ctl
					c.syntax("invalid character " + quoteChar(b[c.i]) + " in string literal")
					return
				}
				c.i = len(b)
				c.syntax("unexpected end of JSON input")
				return
			}
			q = i + k
		}
		seg := b[i:q]
		bs := bytes.IndexByte(seg, '\\')
		if bs >= 0 {
			seg = seg[:bs]
		}
		if ctl := indexControl(seg); ctl >= 0 {
			c.i = i + ctl
			c.syntax("invalid character " + quoteChar(b[c.i]) + " in string literal")
			return
		}
		if bs < 0 {
			c.i = q + 1
			return
		}
		j := i + bs + 1 // the byte after the backslash
		if j >= len(b) {
			c.i = j
			c.syntax("unexpected end of JSON input")
			return
		}
		switch b[j] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = j + 1
		case 'u':
			for k := 1; k <= 4; k++ {
				if j+k >= len(b) {
					c.i = j + k
					c.syntax("unexpected end of JSON input")
					return
				}
				if !isHex(b[j+k]) {
					c.i = j + k
					c.syntax("invalid character " + quoteChar(b[c.i]) + " in \\u hexadecimal character escape")
					return
				}
			}
			i = j + 5
		default:
			c.i = j
			c.syntax("invalid character " + quoteChar(b[j]) + " in string escape code")
			return
		}
	}
}

func isHex(ch byte) bool {
	return '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f' || 'A' <= ch && ch <= 'F'
}

func (c *checker) enter() bool {
	c.depth++
	if c.depth > maxDepth {
		c.syntax("exceeded max depth")
		return false
	}
	return true
}

func (c *checker) array(elem *Shape) {
	if !c.enter() {
		return
	}
	defer func() { c.depth-- }()
	c.i++ // [
	c.skipSpace()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return
	}
	c.path = append(c.path, pathElem{})
	defer func() { c.path = c.path[:len(c.path)-1] }()
	for n := 0; ; n++ {
		c.path[len(c.path)-1].index = n
		c.value(elem)
		if !c.more(']', "array element") {
			return
		}
	}
}

// at reports whether the next byte is want, noting a syntax error (where,
// the place in the grammar) when it is not.
func (c *checker) at(want byte, where string) bool {
	switch {
	case c.i >= len(c.b):
		c.syntax("unexpected end of JSON input")
		return false
	case c.b[c.i] != want:
		c.syntax("invalid character " + quoteChar(c.b[c.i]) + " " + where)
		return false
	}
	return true
}

// more reads what follows a value inside an array or object: true after a
// comma, false after the closing byte or an error.
func (c *checker) more(closing byte, after string) bool {
	if c.err != nil {
		return false
	}
	c.skipSpace()
	if c.i >= len(c.b) {
		c.syntax("unexpected end of JSON input")
		return false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		c.skipSpace()
		return true
	case closing:
		c.i++
		return false
	}
	c.syntax("invalid character " + quoteChar(c.b[c.i]) + " after " + after)
	return false
}

// kept is the occurrence of a field the decoder keeps, and for a deferred
// field the type error of that occurrence.
type kept struct {
	start, end int
	set        bool
	err        *Error
}

func (c *checker) object(s *Shape) {
	if !c.enter() {
		return
	}
	defer func() { c.depth-- }()
	c.i++      // {
	base := -1 // this object's kept occurrences are c.kept[base:]
	if s.track {
		base = len(c.kept)
		c.kept = append(c.kept, make([]kept, len(s.fields))...)
		defer func() { c.kept = c.kept[:base] }()
	}
	c.skipSpace()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		c.finish(s, base)
		return
	}
	c.path = append(c.path, pathElem{})
	for {
		if !c.at('"', "looking for beginning of object key string") {
			return
		}
		ks := c.i
		c.string()
		if c.err != nil {
			return
		}
		key := c.b[ks+1 : c.i-1]
		c.skipSpace()
		if !c.at(':', "after object key") {
			return
		}
		c.i++
		c.skipSpace()

		fs, fi := anyShape, -1
		switch s.kind {
		case kindStruct:
			if fi = s.lookup(key); fi >= 0 {
				fs = s.fields[fi].shape
				c.path[len(c.path)-1].name = s.fields[fi].name
			} else {
				c.path[len(c.path)-1].name = "?"
			}
		case kindMap:
			fs = s.elem
			c.path[len(c.path)-1].name = "?"
		}
		vs := c.i
		if fs.deferred {
			soft, softErr := c.soft, c.softErr
			c.soft, c.softErr = true, nil
			c.value(fs)
			c.kept[base+fi] = kept{start: vs, end: c.i, set: true, err: c.softErr}
			c.soft, c.softErr = soft, softErr
		} else {
			c.value(fs)
			if c.err == nil && fi >= 0 && base >= 0 && (s.fields[fi].raw || c.b[vs] != 'n') {
				c.kept[base+fi] = kept{start: vs, end: c.i, set: true}
			}
		}
		if !c.more('}', "object key:value pair") {
			break
		}
	}
	if c.err != nil {
		return
	}
	c.path = c.path[:len(c.path)-1]
	c.finish(s, base)
}

// finish reports the errors of kept deferred occurrences and runs s's hook.
func (c *checker) finish(s *Shape, base int) {
	if base < 0 {
		return
	}
	for _, k := range c.kept[base:] {
		if k.err != nil {
			c.fail(k.err)
		}
	}
	if s.hook != nil && c.err == nil {
		if err := s.hook(Object{c: c, s: s, base: base}); err != nil {
			e, ok := err.(*Error)
			if !ok {
				e = &Error{Offset: c.i, Path: c.pathString(), Msg: err.Error()}
			}
			c.fail(e)
		}
	}
}

// lookup is the index of the field key names, as encoding/json matches
// it: exactly, or else case-insensitively; -1 when none.
func (s *Shape) lookup(key []byte) int {
	if bytes.IndexByte(key, '\\') >= 0 {
		var k string
		if err := json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k); err != nil {
			return -1
		}
		key = []byte(k)
	}
	for i := range s.fields {
		if string(key) == s.fields[i].name {
			return i
		}
	}
	for i := range s.fields {
		if bytes.EqualFold(key, []byte(s.fields[i].name)) {
			return i
		}
	}
	return -1
}

// Object is the view a Hook has of the object just read.
type Object struct {
	c    *checker
	s    *Shape
	base int // the object's kept occurrences are c.kept[base:]
}

func (o Object) kept(jsonName string) kept {
	for i, f := range o.s.fields {
		if f.name == jsonName {
			return o.c.kept[o.base+i]
		}
	}
	panic("jsonwire: " + o.s.name + " has no field " + jsonName)
}

// Raw is the occurrence of field jsonName the decoder keeps (for a raw
// field the last, null included), or nil when the field is absent.
func (o Object) Raw(jsonName string) []byte {
	k := o.kept(jsonName)
	if !k.set {
		return nil
	}
	return o.c.b[k.start:k.end]
}

// String is the value of string field jsonName as the decoder leaves it:
// its last non-null occurrence, "" when there is none.
func (o Object) String(jsonName string) string {
	raw := o.Raw(jsonName)
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var v string
	_ = json.Unmarshal(raw, &v) // valid: checked before the hook runs
	return v
}

// Check checks the kept occurrence of field jsonName against s, as if s
// were the field's shape.
func (o Object) Check(jsonName string, s *Shape) error {
	k := o.kept(jsonName)
	if !k.set {
		return nil
	}
	sub := checker{b: o.c.b, i: k.start, depth: o.c.depth}
	sub.kept = sub.keptBuf[:0]
	sub.path = append(append(sub.pathBuf[:0], o.c.path...), pathElem{name: jsonName})
	sub.value(s)
	if sub.err != nil {
		return sub.err
	}
	return nil
}

func quoteChar(ch byte) string {
	if ch == '\'' {
		return `'\''`
	}
	if ch == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(ch)))
	return "'" + s[1:len(s)-1] + "'"
}
