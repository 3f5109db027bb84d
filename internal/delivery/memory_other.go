//go:build !linux

package delivery

// payloadMemory is memory for a payload read out of band.
func payloadMemory(size int) []byte { return make([]byte, size) }
