package jsonwire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// fastDecode decodes the common case of a provider's JSON in one pass that
// skips the bytes of strings at memory speed (bytes.IndexByte), where the
// encoding/json v2 engine reads them a byte at a time, twice in v1 mode.
// It decodes only what has exactly one meaning under encoding/json's rules
// and reports false on anything else (a key matching a field only by case,
// a repeated field, invalid UTF-8, a number that is no integer for an int,
// a null where v1 mode would keep a value, a type it has no plan for, a
// syntax error): the caller then zeroes v and decodes in v1 mode, which
// gives the same value or error. FuzzUnmarshal holds the two together.
func fastDecode(data []byte, v any) bool { return fastDecodeInto(data, v, false) }

// fastDecodeInto is fastDecode; with share, long strings and raw values
// share data's memory instead of copying it (see UnmarshalOwned).
func fastDecodeInto(data []byte, v any, share bool) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false
	}
	p := planOf(rv.Type().Elem())
	if p == nil {
		return false
	}
	d := fastDecoder{b: data, share: share}
	d.space()
	if !d.value(p, rv.Elem(), 0) {
		return false
	}
	d.space()
	return d.i == len(d.b)
}

// plan is how fastDecode fills a Go type.
type plan struct {
	kind reflect.Kind // of the type; reflect.Invalid for json.RawMessage
	typ  reflect.Type
	elem *plan // pointer and slice element
	// fields of a struct, by exact JSON name; folded holds every name's
	// fold, so that a key matching one only by case is left to v1 mode.
	fields map[string]fieldPlan
	folded map[string]bool
}

type fieldPlan struct {
	index int
	plan  *plan
}

var (
	plansMu sync.Mutex
	plans   = map[reflect.Type]*plan{} // under plansMu
	// planCache holds planOf's answers for reading without the lock.
	planCache sync.Map
)

// planOf returns the plan of t, nil when fastDecode cannot decode it.
// Plans are built into a map of their own and kept only when t's is whole:
// a recursive type refers to its own plan before that plan is known to
// be whole, and a failing part fails every type that contains it.
func planOf(t reflect.Type) *plan {
	if p, ok := planCache.Load(t); ok {
		return p.(*plan)
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	p := buildTop(t)
	planCache.Store(t, p)
	return p
}

// buildTop is planOf under plansMu.
func buildTop(t reflect.Type) *plan {
	if p, ok := plans[t]; ok {
		return p
	}
	built := map[reflect.Type]*plan{}
	p := buildPlan(t, built)
	if p == nil {
		plans[t] = nil
		return nil
	}
	for bt, bp := range built {
		plans[bt] = bp
	}
	return p
}

// buildPlan builds t's plan into built; nil when some part of t cannot
// be decoded here.
func buildPlan(t reflect.Type, built map[reflect.Type]*plan) *plan {
	if p, ok := plans[t]; ok && p != nil {
		return p
	}
	if p, ok := built[t]; ok {
		return p // done, or in progress up the stack (a recursive type)
	}
	p := &plan{kind: t.Kind(), typ: t}
	if t == reflect.TypeFor[json.RawMessage]() {
		p.kind = reflect.Invalid
		built[t] = p
		return p
	}
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		t.Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) {
		return nil
	}
	built[t] = p
	ok := true
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float64, reflect.Int, reflect.Int64:
	case reflect.Pointer, reflect.Slice:
		p.elem = buildPlan(t.Elem(), built)
		ok = p.elem != nil
	case reflect.Struct:
		p.fields = map[string]fieldPlan{}
		p.folded = map[string]bool{}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				ok = false
				break
			}
			name, opts, decoded := jsonField(f)
			if !decoded {
				continue
			}
			if opts != "" && opts != "omitempty" && opts != "omitzero" {
				ok = false // ",string" and the like
				break
			}
			if _, dup := p.fields[name]; dup || !isPlainName(name) {
				ok = false
				break
			}
			fp := buildPlan(f.Type, built)
			if fp == nil {
				ok = false
				break
			}
			p.fields[name] = fieldPlan{index: i, plan: fp}
			p.folded[foldName(name)] = true
		}
	default:
		ok = false
	}
	if !ok {
		delete(built, t)
		return nil
	}
	return p
}

// isPlainName reports whether a JSON name is ASCII letters, digits, '_'
// and '-', whose case folding is plain ASCII.
func isPlainName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

// foldName lowers ASCII letters and drops '_' and '-': any key whose fold
// is a field's, but that is not the field's exact name, is left to v1
// mode, whatever its rules for case and delimiters.
func foldName(s string) string { return string(appendFold(nil, []byte(s))) }

// appendFold appends the fold of s (foldName) to dst.
func appendFold(dst, s []byte) []byte {
	for _, c := range s {
		switch {
		case c == '_' || c == '-':
		case c >= 'A' && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// fastDecoder reads one document.
type fastDecoder struct {
	b []byte
	i int
	// share is set when b is the caller's to keep and never changes again:
	// a string or raw value of at least shareMin bytes then points into b
	// instead of being copied.
	share bool
}

// shareMin is the least length of a shared string or raw value. Shorter
// ones are copied, so that an id or a role does not keep a whole answer in
// memory once its long content is gone; a long value is most of its
// document, which sharing keeps alive in place of a copy.
const shareMin = 256

// bytesOf is b[i:j] as a value to keep: shared or copied.
func (d *fastDecoder) bytesOf(i, j int) []byte {
	if d.share && j-i >= shareMin {
		return d.b[i:j:j]
	}
	return append([]byte(nil), d.b[i:j]...)
}

// maxFastDepth bounds nesting; deeper documents go to v1 mode.
const maxFastDepth = 512

func (d *fastDecoder) space() { d.i = skipSpace(d.b, d.i) }

// value decodes the next value into v, of plan p.
func (d *fastDecoder) value(p *plan, v reflect.Value, depth int) bool {
	if d.i >= len(d.b) || depth > maxFastDepth {
		return false
	}
	c := d.b[d.i]
	if p.kind == reflect.Invalid { // json.RawMessage: the value's bytes
		start := d.i
		if !d.skip(depth) {
			return false
		}
		v.SetBytes(d.bytesOf(start, d.i))
		return true
	}
	if c == 'n' {
		if !d.literal("null") {
			return false
		}
		switch p.kind {
		case reflect.Pointer, reflect.Slice:
			v.SetZero()
			return true
		}
		return false // v1 mode keeps the value it had: left to it
	}
	switch p.kind {
	case reflect.String:
		if c != '"' {
			return false
		}
		s, ok := d.str()
		if !ok {
			return false
		}
		v.SetString(s)
		return true
	case reflect.Bool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
		case d.literal("false"):
			v.SetBool(false)
		default:
			return false
		}
		return true
	case reflect.Int, reflect.Int64:
		lit, integer := d.number()
		if lit == nil || !integer {
			return false
		}
		n, err := strconv.ParseInt(string(lit), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
		return true
	case reflect.Float64:
		lit, _ := d.number()
		if lit == nil {
			return false
		}
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			return false
		}
		v.SetFloat(f)
		return true
	case reflect.Pointer:
		e := reflect.New(p.typ.Elem())
		if !d.value(p.elem, e.Elem(), depth+1) {
			return false
		}
		v.Set(e)
		return true
	case reflect.Slice:
		return d.array(p, v, depth)
	case reflect.Struct:
		return d.object(p, v, depth)
	}
	return false
}

func (d *fastDecoder) array(p *plan, v reflect.Value, depth int) bool {
	if d.b[d.i] != '[' {
		return false
	}
	if d.open(']') {
		v.Set(reflect.MakeSlice(p.typ, 0, 0)) // [] is an empty slice, not nil
		return true
	}
	// Elements are decoded in place, growing v itself: no slice header
	// is allocated per element.
	v.SetZero()
	for n := 0; ; n++ {
		if n == v.Cap() {
			v.Grow(1)
		}
		v.SetLen(n + 1)
		if !d.value(p.elem, v.Index(n), depth+1) {
			return false
		}
		if more, ok := d.next(']'); !more {
			return ok
		}
	}
}

func (d *fastDecoder) object(p *plan, v reflect.Value, depth int) bool {
	if d.b[d.i] != '{' {
		return false
	}
	if d.open('}') {
		return true
	}
	var seen uint64 // fields set, by index (structs here have fewer than 64)
	var fold [64]byte
	for {
		key, escaped, ok := d.memberName()
		if !ok || escaped {
			return false
		}
		f, known := p.fields[string(key)]
		switch {
		case known:
			if f.index >= 64 || seen&(1<<f.index) != 0 {
				return false // a repeated field: v1 mode merges
			}
			seen |= 1 << f.index
			if !d.value(f.plan, v.Field(f.index), depth+1) {
				return false
			}
		case !isPlainName(string(key)) || len(key) > 64 || p.folded[string(appendFold(fold[:0], key))]:
			return false // matches a field by case, or a name to fold
		default:
			if !d.skip(depth + 1) {
				return false
			}
		}
		if more, ok := d.next('}'); !more {
			return ok
		}
	}
}

// open consumes a container's opening byte and the space after it, and
// its closing byte end when it is empty, which it reports.
func (d *fastDecoder) open(end byte) (empty bool) {
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == end {
		d.i++
		return true
	}
	return false
}

// next consumes what follows a member or an element: a comma and the
// space after it (more), or the container's closing byte end (not more).
// Anything else is not valid JSON (not ok).
func (d *fastDecoder) next(end byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		d.space()
		return true, true
	case end:
		d.i++
		return false, true
	}
	return false, false
}

// memberName consumes an object member's name, the colon after it and
// the space around, and returns the name as rawString does.
func (d *fastDecoder) memberName() (name []byte, escaped, ok bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false, false
	}
	if name, escaped, ok = d.rawString(); !ok {
		return nil, false, false
	}
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != ':' {
		return nil, false, false
	}
	d.i++
	d.space()
	return name, escaped, true
}

// rawString reads a string and returns the bytes between its quotes,
// escapes undecoded, and whether it has any. Strings are where a document
// may hold other than ASCII (anywhere else such a byte is a syntax error
// to the decoder), so checking each string's UTF-8 checks the document's.
func (d *fastDecoder) rawString() (raw []byte, escaped, ok bool) {
	start := d.i + 1
	i := start
	for {
		q := bytes.IndexByte(d.b[i:], '"')
		if q < 0 {
			return nil, false, false
		}
		end := i + q
		// The quote ends the string unless an odd run of backslashes
		// precedes it.
		k := end
		for k > start && d.b[k-1] == '\\' {
			k--
		}
		if (end-k)%2 == 0 {
			s := d.b[start:end]
			escaped, ok := validString(s)
			if !ok {
				return nil, false, false
			}
			d.i = end + 1
			return s, escaped, true
		}
		i = end + 1
	}
}

// validString checks a string's contents: valid UTF-8, no control bytes,
// and every backslash starting a valid escape; escaped says there is one.
// Printable ASCII, most of any document, is passed over 32 bytes at a
// time (printableASCII); the rest is checked by utf8.Valid and
// indexControl.
func validString(s []byte) (escaped, ok bool) {
	if rest := s[printableASCII(s):]; len(rest) > 0 && (indexControl(rest) >= 0 || !utf8.Valid(rest)) {
		return false, false
	}
	return validEscapes(s)
}

// validEscapes checks that every backslash of s starts a valid escape;
// escaped says there is one.
func validEscapes(s []byte) (escaped, ok bool) {
	for i := 0; ; {
		j := bytes.IndexByte(s[i:], '\\')
		if j < 0 {
			return escaped, true
		}
		escaped = true
		i += j + 1
		if i >= len(s) {
			return true, false
		}
		switch s[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+5 > len(s) {
				return true, false
			}
			for _, h := range s[i+1 : i+5] {
				if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
					return true, false
				}
			}
			i += 5
		default:
			return true, false
		}
	}
}

// str reads a string value.
func (d *fastDecoder) str() (string, bool) {
	raw, escaped, ok := d.rawString()
	if !ok {
		return "", false
	}
	if !escaped {
		if d.share && len(raw) >= shareMin {
			return unsafe.String(&raw[0], len(raw)), true
		}
		return string(raw), true
	}
	if s, ok := unescape(raw); ok {
		return s, true
	}
	// \u escapes: decoded by the rules of v1 mode (surrogates), on this
	// string alone.
	var s string
	err := jsonv1.Unmarshal(d.b[d.i-len(raw)-2:d.i], &s)
	return s, err == nil
}

// unescape decodes the contents of a string whose escapes are valid
// (validString) and not \u: a newline or a quote in a message, mostly.
// It reports false on a \u escape.
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			out = append(out, raw...)
			return unsafe.String(unsafe.SliceData(out), len(out)), true
		}
		out = append(out, raw[:j]...)
		var c byte
		switch raw[j+1] {
		case '"', '\\', '/':
			c = raw[j+1]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		default: // 'u'
			return "", false
		}
		out = append(out, c)
		raw = raw[j+2:]
	}
}

// literal consumes lit if it is next.
func (d *fastDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

// number reads a JSON number; integer says it has no fraction or
// exponent. nil when the bytes are no JSON number.
func (d *fastDecoder) number() (lit []byte, integer bool) {
	start, i := d.i, d.i
	b := d.b
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n {
			return nil, false
		}
	}
	d.i = i
	return b[start:i], integer
}

// skip consumes one valid value of any type.
func (d *fastDecoder) skip(depth int) bool {
	if d.i >= len(d.b) || depth > maxFastDepth {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, _, ok := d.rawString()
		return ok
	case c == '{':
		if d.open('}') {
			return true
		}
		for {
			if _, _, ok := d.memberName(); !ok || !d.skip(depth+1) {
				return false
			}
			if more, ok := d.next('}'); !more {
				return ok
			}
		}
	case c == '[':
		if d.open(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			if more, ok := d.next(']'); !more {
				return ok
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	default:
		lit, _ := d.number()
		return lit != nil
	}
}
