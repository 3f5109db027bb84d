package ibverbs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
)

// A buffer's owner shares memory through a Handle; whoever holds the
// handle reads, writes and adds to it one-sided: the owner's code does not
// run. Here the holder is this process too; a proc elsewhere that got the
// handle in a message does the same, over shared memory on this host or
// TCP (or InfiniBand) from another.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The owner: four float32 weights (16 bytes), then an 8-byte counter.
	buf, err := ibverbs.NewBuffer(24)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Close()
	view, err := ibverbs.View[float32](buf) // the buffer itself, no copy
	if err != nil {
		fmt.Println(err)
		return
	}
	weights := view[:4]
	copy(weights, []float32{0.5, 1.5, 2.5, 3.5})
	h := buf.Handle() // a small value: send it in any message

	// A holder of h reads the weights into memory of its own...
	got := make([]float32, 4)
	if err := h.ReadInto(ctx, ibverbs.Bytes(got)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("read:", got)

	// ...writes a span of them (weight 1, at byte 4), which the owner sees
	// in its memory...
	if err := h.WriteAt(ctx, ibverbs.Bytes([]float32{9}), 4); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("owner's weights:", weights)

	// ...and adds to an 8-byte word atomically, getting its value before:
	// holders count or take turns this way.
	for range 2 {
		old, err := h.FetchAdd(ctx, 16, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("counter was", old)
	}
	// Output:
	// read: [0.5 1.5 2.5 3.5]
	// owner's weights: [0.5 9 2.5 3.5]
	// counter was 0
	// counter was 1
}
