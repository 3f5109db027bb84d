package ibverbs

import "context"

// ReadAt and WriteAt transfer at an offset, which every backend takes but
// the exported API does not use yet (it transfers from offset 0), so that
// the tests reach the backends' ranges.
func ReadAt(ctx context.Context, h Handle, off int, dst []byte) error {
	return h.transfer(ctx, off, dst, false)
}

func WriteAt(ctx context.Context, h Handle, off int, src []byte) error {
	return h.transfer(ctx, off, src, true)
}
