//go:build !linux

package delivery

// payloadMemory is memory for a payload read out of band: memory the
// program gave back (Recycle) first.
func payloadMemory(size int) []byte {
	if b := recycled.take(size); b != nil {
		return b
	}
	return recycled.fresh(make([]byte, size))
}
