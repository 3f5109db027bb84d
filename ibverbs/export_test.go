package ibverbs

import "context"

// ReadAt and WriteAt are the methods, as functions, for the tests written
// before the methods were exported.
func ReadAt(ctx context.Context, h Handle, off int, dst []byte) error { return h.ReadAt(ctx, dst, off) }

func WriteAt(ctx context.Context, h Handle, off int, src []byte) error {
	return h.WriteAt(ctx, src, off)
}
