package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/vmihailenco/msgpack/v5"
)

// frameWith is a frame whose header is the given msgpack values.
func frameWith(t *testing.T, fields ...any) []byte {
	t.Helper()
	hdr, err := msgpack.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{0, 0, 0, byte(len(hdr))}, hdr...), 0xc0)
}

// TestHeaderChecked: every field of a header has its type and range, and
// a region's length is checked against the bytes present before it is
// allocated.
func TestHeaderChecked(t *testing.T) {
	regionBomb := []byte{0, 0, 0, 0, 0x98, 1, 0xa0, 0, 0xa0, 0xa0, 0xff, 0, 0xdd, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3}
	regionBomb[3] = byte(len(regionBomb) - 4)
	tests := []struct {
		name string
		data []byte
	}{
		{"region claiming 2^31 numbers", regionBomb},
		{"kind over 255", frameWith(t, 256, "m", 0, "c", "x", -1, 0, nil)},
		{"negative port", frameWith(t, 1, "m", -5, "c", "x", -1, 0, nil)},
		{"rank below -1", frameWith(t, 1, "m", 0, "c", "x", -2, 0, nil)},
		{"target of the wrong type", frameWith(t, 1, 7, 0, "c", "x", -1, 0, nil)},
		{"region not an array", frameWith(t, 1, "m", 0, "c", "x", -1, 0, "r")},
		{"region not in threes", frameWith(t, 1, "m", 0, "c", "x", -1, 0, []int{0, 1})},
		{"too many fields", frameWith(t, 1, "m", 0, "c", "x", -1, 0, nil, 9)},
		{"header length past the limit", []byte{0, 1, 0, 0, 0x90}},
		{"header length past the frame", []byte{0, 0, 0, 200, 0x90}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := alloc.By(func() { _, err = Parse(tt.data) })
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Parse = %v, want ErrDecode", err)
			}
			if n > alloc.Slack {
				t.Fatalf("a frame of %d bytes allocated %d", len(tt.data), n)
			}
		})
	}
	// Bytes after the header's fields, inside its length.
	data := frameWith(t, 1, "m", 0, "c", "x", -1, 0, nil)
	data = append(data[:len(data)-1], 0xc0, 0xc0)
	data[3]++
	if _, err := Parse(data); !errors.Is(err, ErrDecode) {
		t.Fatalf("a header with a byte left over: %v", err)
	}
}

func mpBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPayloadBombs: payloads of a few bytes that claim gigabytes are
// refused before msgpack sees them, whatever they decode into; honest
// payloads of every shape pass.
func TestPayloadBombs(t *testing.T) {
	deep := strings.Repeat("\x91", maxDepth+1) + "\x01"
	bombs := []struct {
		name string
		b    []byte
		into any
	}{
		{"slice of 2^32 ints", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 1}, new([]int)},
		{"2^32 values into any", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 1}, new(any)},
		{"map of 2^32 entries", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0, 1}, new(map[string]int)},
		{"string of 4 GiB", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'x'}, new(string)},
		{"ranks of a spawnprocs request", []byte{0x81, 0xa5, 'r', 'a', 'n', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 1}, new(SpawnProcsReq)},
		{"claims that fit alone but not together", []byte{0x92, 0xdc, 0x00, 0x05, 1, 2, 3, 4, 5, 0xdc, 0x00, 0x05}, new([][]int)},
		{"nesting past the limit", []byte(deep), new(any)},
		// msgpack/v5 reads a map from an extension's data when it decodes
		// into a map: here a []int of 2^32 within 12 bytes of "timestamp".
		{"a map hidden in an extension", []byte{0xc7, 0x0c, 0xff, 0x81, 0xa5, 'r', 'a', 'n', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}, new(map[string][]int)},
		{"reserved code", []byte{0x92, 0xc1, 1}, new([]int)},
	}
	for _, tt := range bombs {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := alloc.By(func() {
				err = DecodePayload(tt.b, []reflect.Type{reflect.TypeOf(tt.into)}, func(d *msgpack.Decoder) error { return d.Decode(tt.into) })
			})
			if err == nil {
				t.Fatal("decoded")
			}
			// (The check's own stack grows with the nesting: 8 bytes a
			// level, at most one level a byte.)
			if n > uint64(16*len(tt.b))+alloc.Slack {
				t.Fatalf("%d bytes allocated %d", len(tt.b), n)
			}
		})
	}
	for _, v := range []any{
		nil, []any{}, []any{1, "two", 3.0, []byte("four"), map[string]any{"five": []int{5}}},
		&SpawnProcsReq{IDs: []string{"c-1", "c-2"}, Ranks: []int{0, 1}, Env: [][]string{{"A=1"}, nil}, Proc: "c", Port: 2},
		map[string][]int{"a": {1, 2}}, make([]byte, 70000), strings.Repeat("s", 70000), make([]int, 70000),
		// Timestamps are extensions: in a map, the one whose data reads
		// as a map is the only kind refused.
		map[string]any{"t": msgpack.RawMessage{0xd6, 0xff, 0x65, 0, 0, 0}},
	} {
		b := mpBytes(t, v)
		if _, err := CheckMsgpack(b); err != nil {
			t.Errorf("CheckMsgpack(%T) = %v", v, err)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"c", "c-1", "h0-3-2", "c.m1", "c-1.m12", "sys", "a_b"} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", ".", "a.", ".a", "a..b", "a b", "a*", ">", "a\r\nb", "é", strings.Repeat("a", 257)} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}
