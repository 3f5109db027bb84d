package dtensor

import (
	"reflect"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Rewinding a compiled tape. gorgonia's tapeMachine.Reset sets its
// program counter to 0 and drops every register, so that each run's
// alloc instructions allocate every matrix of the step again (a matmul's
// result, a broadcast's repeat, each gradient): most of a proc's
// allocations in a training step, and the garbage collection they
// cause. rewind sets the counter to 0 and drops every register as Reset
// does, but for those that an alloc instruction writes first: there it
// leaves the tensor of the last run, zeroed and in the alloc's shape,
// which the alloc then takes as it is (it allocates only a register of
// another shape or type). What the run sees is what Reset gives it: each
// register nil until written, or a zeroed tensor of the alloc's shape.
// A tensor is kept only if it owns its memory: none of it is another
// register's or a leaf's (a register may end a run holding a view), or
// writing into it would write into a value still to be read.
//
// The machine's counter, registers and program are unexported fields of
// gorgonia's tapeMachine (gorgonia.org/gorgonia v0.9.18, the version
// go.mod pins). tapeOf finds them by name and type; if a gorgonia
// release has them otherwise, rewind falls back to Reset, and
// TestTapeRewinds fails so that the change is seen.

// tape is a compiled machine's counter and registers, and the shape of
// each register an alloc instruction writes first.
type tape struct {
	vm     gorgonia.VM
	pc     *int              // nil: not reachable, use Reset
	cpumem *[]gorgonia.Value // the registers
	allocs map[int]tensor.Shape
}

// tapeOf reaches vm's counter and registers if vm is a tapeMachine of
// the known layout, and reads its program's alloc instructions.
func tapeOf(vm gorgonia.VM) tape {
	t := tape{vm: vm}
	v := reflect.ValueOf(vm)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return t
	}
	m := v.Elem()
	pc, mem, prog := m.FieldByName("pc"), m.FieldByName("cpumem"), m.FieldByName("p")
	if !pc.IsValid() || pc.Type() != reflect.TypeFor[int]() || !mem.IsValid() || mem.Type() != reflect.TypeFor[[]gorgonia.Value]() ||
		!prog.IsValid() || prog.Kind() != reflect.Pointer || prog.IsNil() {
		return t
	}
	allocs, ok := firstAllocs(prog.Elem().FieldByName("instructions"))
	if !ok {
		return t
	}
	t.pc = (*int)(unsafe.Pointer(pc.UnsafeAddr()))
	t.cpumem = (*[]gorgonia.Value)(unsafe.Pointer(mem.UnsafeAddr()))
	t.allocs = allocs
	return t
}

// firstAllocs is, of the program's instructions, the registers (on the
// CPU) whose first writer is an alloc, with its shape; false if an
// instruction is not of the known layout.
func firstAllocs(instrs reflect.Value) (map[int]tensor.Shape, bool) {
	if !instrs.IsValid() || instrs.Kind() != reflect.Slice {
		return nil, false
	}
	allocs := map[int]tensor.Shape{}
	written := map[int]bool{}
	for i := range instrs.Len() {
		in := instrs.Index(i)
		for in.Kind() == reflect.Interface || in.Kind() == reflect.Pointer {
			if in.IsNil() {
				return nil, false
			}
			in = in.Elem()
		}
		if in.Kind() != reflect.Struct {
			return nil, false
		}
		w := in.FieldByName("writeTo")
		if !w.IsValid() {
			continue // reads only: DoWork, Free, a read out
		}
		id, dev := w.FieldByName("id"), w.FieldByName("device")
		if !id.IsValid() || id.Kind() != reflect.Int || !dev.IsValid() || dev.Kind() != reflect.Int {
			return nil, false
		}
		r := int(id.Int())
		if dev.Int() != int64(gorgonia.CPU) || written[r] {
			continue
		}
		written[r] = true
		if in.Type().Name() != "alloc" {
			continue
		}
		s := in.FieldByName("s")
		if !s.IsValid() || s.Kind() != reflect.Slice || s.Type().Elem().Kind() != reflect.Int {
			return nil, false
		}
		shape := make(tensor.Shape, s.Len())
		for j := range shape {
			shape[j] = int(s.Index(j).Int())
		}
		allocs[r] = shape
	}
	return allocs, true
}

// rewind readies the tape for a run whose leaves' values are leaves:
// the counter at 0, every register dropped but those an alloc writes
// first, kept as the alloc would make them (see above).
func (t tape) rewind(leaves []any) {
	if t.pc == nil {
		t.vm.Reset()
		return
	}
	*t.pc = 0
	regs := *t.cpumem
	spans := make([]memSpan, 0, len(regs)+len(leaves))
	for _, v := range regs {
		spans = append(spans, spanOf(v))
	}
	for _, v := range leaves {
		spans = append(spans, spanOf(v))
	}
	for i, v := range regs {
		shape, first := t.allocs[i]
		d, ok := v.(*tensor.Dense)
		if !first || !ok || d.IsView() || spans[i].size == 0 || sharesMemory(spans, i) ||
			d.Shape().TotalSize() != shape.TotalSize() || d.Reshape(shape...) != nil {
			regs[i] = nil
			continue
		}
		d.Zero()
	}
}

// memSpan is the memory a value holds: [at, at+size).
type memSpan struct{ at, size uintptr }

// spanOf is v's memory, or none for what is not a dense tensor.
func spanOf(v any) memSpan {
	d, ok := v.(*tensor.Dense)
	if !ok || d == nil || d.Data() == nil {
		return memSpan{}
	}
	return memSpan{at: d.Uintptr(), size: d.MemSize()}
}

// sharesMemory reports whether spans[i] overlaps another of spans (the
// same tensor in two registers counts).
func sharesMemory(spans []memSpan, i int) bool {
	a := spans[i]
	for j, b := range spans {
		if j != i && b.size != 0 && a.at < b.at+b.size && b.at < a.at+a.size {
			return true
		}
	}
	return false
}
