package bus

// Stats is what a Conn sent and received since it connected: messages
// and their payload bytes, as the bus carries them. A batch (batch.go)
// or a chunk (chunk.go) is one message here, whatever it carries.
type Stats struct {
	InMsgs, OutMsgs   uint64
	InBytes, OutBytes uint64
}

// Stats is the connection's traffic so far. It takes the nats
// connection's lock for a moment: read it when a figure is wanted, not
// per message.
func (c *Conn) Stats() Stats {
	s := c.nc.Stats()
	return Stats{InMsgs: s.InMsgs, OutMsgs: s.OutMsgs, InBytes: s.InBytes, OutBytes: s.OutBytes}
}
