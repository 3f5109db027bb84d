package wirecheck

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Own is what the checker asks of the types that the package using it
// encodes by codecs of its own, which msgpack finds by registration
// rather than by their methods (actorrt's extents, meshes and ports).
type Own interface {
	// Own tells whether t is one of them: its values travel whole.
	Own(t reflect.Type) bool
	// Carried is the type of the values t's codec sends in turn (a
	// ValueMesh[T]'s or a Port[T]'s T), which must travel too.
	Carried(t reflect.Type) (elem reflect.Type, ok bool)
}

// Problems lists why values of t cannot travel in a message, one problem
// each; none if they can.
func Problems(t reflect.Type, own Own) []string {
	c := wireChecker{own: own, seen: map[wireSeen]bool{}}
	c.check(t, false, "")
	return c.problems
}

// Check is Problems as one error, or nil.
func Check(t reflect.Type, own Own) error {
	if ps := Problems(t, own); len(ps) > 0 {
		return errors.New(strings.Join(ps, "; "))
	}
	return nil
}

// codecTypes holds the types given a codec by Registered.
var codecTypes sync.Map // reflect.Type → struct{}

// Registered records that t was given a codec by msgpack.Register (the
// SDK's RegisterCodec): its fields are then its codec's business.
func Registered(t reflect.Type) { codecTypes.Store(t, struct{}{}) }

func registered(t reflect.Type) bool {
	_, ok := codecTypes.Load(t)
	return ok
}

type wireChecker struct {
	own      Own
	seen     map[wireSeen]bool
	problems []string
}

// wireSeen keys the types already checked. Whether a value is addressable
// changes what msgpack can do with it (a codec with pointer receivers
// works only on an addressable value), so it is part of the key.
type wireSeen struct {
	t    reflect.Type
	addr bool
}

func (c *wireChecker) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// check checks values of t, found at path (a selector such as
// Config.inner.secret, "" for the value itself). addr tells whether msgpack
// sees the value as addressable: an argument or result is not, the element
// of a slice or what a pointer points to is.
func (c *wireChecker) check(t reflect.Type, addr bool, path string) {
	if c.seen[wireSeen{t, addr}] {
		return
	}
	c.seen[wireSeen{t, addr}] = true
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Uintptr, reflect.Complex64, reflect.Complex128:
		c.add("%sa %s cannot be sent in a message", pathPrefix(path), t.Kind())
		return
	case reflect.Interface:
		c.add("%sinterface type %s cannot be decoded without a concrete type; use a concrete type", pathPrefix(path), t)
		return
	}
	if c.codec(t, addr, path) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		c.check(t.Elem(), true, path)
	case reflect.Slice:
		c.check(t.Elem(), true, pathElem(path, "[i]"))
	case reflect.Array:
		c.check(t.Elem(), addr, pathElem(path, "[i]"))
	case reflect.Map:
		c.mapKey(t.Key(), pathElem(path, "(key)"))
		c.check(t.Elem(), false, pathElem(path, "[k]"))
	case reflect.Struct:
		c.structFields(t, t, addr, path)
		c.fieldNames(t, path)
	}
}

// A problem's path names where in a type it lies (Args.Items[i].Name):
// pathPrefix opens a message with it, pathElem and pathField extend it.
func pathPrefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func pathElem(path, suffix string) string {
	if path == "" {
		return ""
	}
	return path + suffix
}

func pathField(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// structFields checks the fields msgpack sends (and those it would skip).
// holder is the type a codec could be given to instead: t, or the struct
// that embeds it.
func (c *wireChecker) structFields(holder, t reflect.Type, addr bool, path string) {
	if path == "" {
		path = t.Name()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts := parseTag(f.Tag.Get("msgpack"))
		fp := pathField(path, f.Name)
		switch {
		case name == "-":
			// Left out on purpose.
		case f.Name == "_" || !f.IsExported() && f.Type.Size() == 0:
			// Holds nothing (padding, or a marker such as _msgpack).
		case f.Anonymous && !f.IsExported():
			// msgpack decodes into an embedded unexported type only by
			// setting its exported fields in place: a plain struct.
			if f.Type.Kind() != reflect.Struct || HasCodec(f.Type) {
				c.add("embedded field %s (%s) has an unexported type, which msgpack cannot set when it decodes: export the type, make it a named field, tag it `msgpack:\"-\"`, or %s",
					fp, f.Type, codecHint(holder))
				continue
			}
			c.structFields(holder, f.Type, addr, fp)
		case !f.IsExported():
			c.add("field %s (%s) is unexported, so it would arrive as its zero value: export it, tag it `msgpack:\"-\"` to leave it out, or %s",
				fp, f.Type, codecHint(holder))
		case opts["intern"] && f.Type.Kind() != reflect.String:
			c.add("field %s (%s): msgpack interns only strings, and panics on a %s: drop the intern option", fp, f.Type, f.Type.Kind())
		case f.Anonymous && opts["inline"] && f.Type.Kind() != reflect.Struct:
			c.add("embedded field %s (%s): msgpack inlines only a struct, and panics on a %s: drop the inline option", fp, f.Type, f.Type.Kind())
		default:
			if f.Anonymous && f.Type.Kind() == reflect.Pointer && inlines(f) {
				c.add("embedded field %s (%s): msgpack inlines its fields, so a nil %s would arrive as a pointer to a zero %s: tag it `msgpack:\",noinline\"`, or embed %s by value",
					fp, f.Type, f.Name, f.Type.Elem(), f.Type.Elem())
			}
			c.check(f.Type, addr, fp)
		}
	}
}

func codecHint(t reflect.Type) string {
	if t.Name() == "" {
		return "make it a named type with a msgpack codec (EncodeMsgpack and DecodeMsgpack, or RegisterCodec)"
	}
	return "give " + t.Name() + " a msgpack codec (EncodeMsgpack and DecodeMsgpack, or RegisterCodec)"
}

// mapKey checks a map's key type: the keys must decode to equal keys.
func (c *wireChecker) mapKey(k reflect.Type, path string) {
	if !HasCodec(k) && holdsPointers(k) {
		c.add("%smap key type %s holds pointers: the keys would arrive as new pointers, which no lookup finds; key the map by value", pathPrefix(path), k)
		return
	}
	c.check(k, false, path)
}

func holdsPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return true
	case reflect.Array:
		return holdsPointers(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if holdsPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// wireCodecs are the interfaces msgpack encodes and decodes a type by, in
// the order it prefers them.
var wireCodecs = []struct {
	enc, dec         reflect.Type
	encName, decName string
}{
	{reflect.TypeFor[msgpack.CustomEncoder](), reflect.TypeFor[msgpack.CustomDecoder](), "EncodeMsgpack", "DecodeMsgpack"},
	{reflect.TypeFor[msgpack.Marshaler](), reflect.TypeFor[msgpack.Unmarshaler](), "MarshalMsgpack", "UnmarshalMsgpack"},
	{reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.BinaryUnmarshaler](), "MarshalBinary", "UnmarshalBinary"},
	{reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](), "MarshalText", "UnmarshalText"},
}

// codecOf finds the codec msgpack would use for t, as an index into
// wireCodecs (or -1), the way it does: the first interface t implements,
// else the first *t implements (onPtr).
func codecOf(t reflect.Type, decode bool) (i int, onPtr bool) {
	iface := func(i int) reflect.Type {
		if decode {
			return wireCodecs[i].dec
		}
		return wireCodecs[i].enc
	}
	for i := range wireCodecs {
		if t.Implements(iface(i)) {
			return i, false
		}
	}
	if t.Kind() != reflect.Pointer {
		for i := range wireCodecs {
			if reflect.PointerTo(t).Implements(iface(i)) {
				return i, true
			}
		}
	}
	return -1, false
}

// HasCodec tells whether msgpack encodes or decodes t by a method of
// t's (or *t's) own.
func HasCodec(t reflect.Type) bool {
	e, _ := codecOf(t, false)
	d, _ := codecOf(t, true)
	return e >= 0 || d >= 0
}

// codec checks a type that msgpack encodes by a method of its own, and
// reports whether it does (its fields are then its own business).
func (c *wireChecker) codec(t reflect.Type, addr bool, path string) bool {
	if c.own.Own(t) {
		if elem, ok := c.own.Carried(t); ok {
			c.check(elem, true, pathElem(path, "[i]"))
		}
		return true
	}
	if registered(t) {
		return true
	}
	enc, encOnPtr := codecOf(t, false)
	dec, _ := codecOf(t, true)
	switch {
	case enc < 0 && dec < 0:
		return false
	case enc < 0:
		c.add("%s%s has %s but no %s, so msgpack would not decode what it encodes: give it both", pathPrefix(path), t, wireCodecs[dec].decName, wireCodecs[dec].encName)
	case dec < 0:
		c.add("%s%s has %s but no %s, so msgpack would not decode what it encodes: give it both", pathPrefix(path), t, wireCodecs[enc].encName, wireCodecs[enc].decName)
	case enc != dec:
		c.add("%s%s encodes with %s but decodes with %s: give it a matching pair", pathPrefix(path), t, wireCodecs[enc].encName, wireCodecs[dec].decName)
	case encOnPtr && !addr:
		c.add("%s%s has %s on *%s only, so msgpack cannot encode a %s passed by value: give it a value receiver, or use *%s",
			pathPrefix(path), t, wireCodecs[enc].encName, t, t, t)
	default:
		base := t
		for base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		if via, ok := promotedCodec(base, wireCodecs[enc].encName); ok {
			c.add("%s%s gets %s from its embedded field %s, so msgpack would send that field alone: name the field, or give %s a msgpack codec of its own",
				pathPrefix(path), t, wireCodecs[enc].encName, via, base.Name())
			return true
		}
		if elem, ok := c.own.Carried(t); ok {
			// Its codec sends values of elem: they must travel too.
			c.check(elem, true, pathElem(path, "[i]"))
		}
	}
	return true
}

// promotedCodec tells whether t's codec method is one an embedded field
// lends it, and which field: a struct that embeds, say, a time.Time gets
// its MarshalBinary, which sends the time and none of the other fields.
func promotedCodec(t reflect.Type, method string) (field string, ok bool) {
	if t.Kind() != reflect.Struct {
		return "", false
	}
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Anonymous && hasMethod(f.Type, method) {
			field = f.Name
			break
		}
	}
	if field == "" {
		return "", false
	}
	m, ok := t.MethodByName(method)
	if !ok {
		m, ok = reflect.PointerTo(t).MethodByName(method)
	}
	if !ok {
		return "", false
	}
	// A promoted method is a wrapper the compiler writes; one that t
	// declares has a source file.
	fn := runtime.FuncForPC(m.Func.Pointer())
	if fn == nil {
		return field, true
	}
	file, _ := fn.FileLine(fn.Entry())
	return field, file == "<autogenerated>"
}

func hasMethod(t reflect.Type, name string) bool {
	if _, ok := t.MethodByName(name); ok {
		return true
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return false
	}
	_, ok := reflect.PointerTo(t).MethodByName(name)
	return ok
}

// fieldNames checks the names msgpack gives a struct's fields: two fields
// sent under one name arrive as one, and a field hidden by an inlined
// namesake is not sent at all.
func (c *wireChecker) fieldNames(t reflect.Type, path string) {
	if path == "" {
		path = t.Name()
	}
	fields, asArray, hidden := wireFields(t, path)
	for _, h := range hidden {
		c.add("field %s is hidden by a field of the same name, so it would not be sent: rename one with a msgpack tag, or tag it `msgpack:\"-\"`", h)
	}
	if asArray {
		return // sent by position: names do not matter
	}
	byName := map[string][]string{}
	var order []string
	for _, f := range fields {
		if byName[f.name] == nil {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f.path)
	}
	for _, name := range order {
		if paths := byName[name]; len(paths) > 1 {
			c.add("fields %s are all sent as %q, so only one would arrive: rename them with msgpack tags, or tag all but one `msgpack:\"-\"`",
				strings.Join(paths, " and "), name)
		}
	}
}

type wireField struct{ name, path string }

// wireFields lists the fields msgpack sends for struct t, under the names
// it sends them by, inlining embedded structs as it does (msgpack's
// getFields); hidden lists the fields an explicit inline drops.
func wireFields(t reflect.Type, path string) (fields []wireField, asArray bool, hidden []string) {
	taken := map[string]bool{} // msgpack's field map: names sent, and inlined structs
	add := func(f wireField) {
		fields = append(fields, f)
		taken[f.name] = true
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts := parseTag(f.Tag.Get("msgpack"))
		if name == "-" {
			continue
		}
		if f.Name == "_msgpack" {
			asArray = opts["as_array"] || opts["asArray"]
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fp := pathField(path, f.Name)
		if f.Anonymous && !opts["noinline"] {
			if opts["inline"] && f.Type.Kind() == reflect.Struct {
				inner, _, innerHidden := wireFields(f.Type, fp)
				hidden = append(hidden, innerHidden...)
				for _, w := range inner {
					if taken[w.name] {
						hidden = append(hidden, w.path)
						continue
					}
					add(w)
				}
				taken[name] = true
				continue
			}
			if inlines(f) {
				inner, _, innerHidden := wireFields(structBehind(f.Type), fp)
				shadowed := false
				for _, w := range inner {
					shadowed = shadowed || taken[w.name]
				}
				if !shadowed { // else msgpack sends the struct whole, under its name
					hidden = append(hidden, innerHidden...)
					for _, w := range inner {
						add(w)
					}
					taken[name] = true
					continue
				}
			}
		}
		add(wireField{name, fp})
	}
	return fields, asArray, hidden
}

// inlines tells whether msgpack may inline embedded field f: a struct, or
// pointer to one, that it encodes field by field.
func inlines(f reflect.StructField) bool {
	_, opts := parseTag(f.Tag.Get("msgpack"))
	if !f.Anonymous || opts["noinline"] {
		return false
	}
	st := structBehind(f.Type)
	return st != nil && !HasCodec(st)
}

func structBehind(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// parseTag splits a msgpack tag into its name and options.
func parseTag(tag string) (name string, opts map[string]bool) {
	name, rest, _ := strings.Cut(tag, ",")
	opts = map[string]bool{}
	for _, o := range strings.Split(rest, ",") {
		if o != "" {
			k, _, _ := strings.Cut(o, ":")
			opts[k] = true
		}
	}
	return name, opts
}
