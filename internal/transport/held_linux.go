//go:build linux

package transport

// ReadHeld is HeldReader's. It stays in one RawConn.Read, whose start
// forgets any readiness the poller has seen, and which therefore has to
// read before it may wait: inside it, after a lone datagram that emptied
// the socket, it waits for the next readiness at once. That is sound
// because the poller is edge-triggered: a datagram that arrives after the
// read that found the socket empty brings a readiness of its own.
//
// After a batch of several that emptied the socket it reads again first,
// as ReadBatch's callers do: datagrams that come faster than a batch is
// handled are likely there already, and that read takes them without
// waiting for the poller (which, with every P busy, may not look for a
// while). A lone datagram says they come further apart.
func (c *mmsgConn) ReadHeld(ms []Message, stop <-chan struct{}, handle func([]Message) bool) (handled bool, err error) {
	if len(ms) == 0 {
		return false, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	wait := false
	rerr := c.rc.Read(func(fd uintptr) bool {
		for {
			if wait {
				wait = false
				return false
			}
			for i := range ms {
				ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
			}
			if c.groAsk.Load() != 0 {
				c.takeGRO(fd)
			}
			var n int
			if g := c.gro; g != nil {
				if g.next >= g.n {
					g.prepare(min(len(ms), groSlots))
					if !g.b.recv(fd) {
						return false
					}
					if err = g.finish(c, nil); err != nil {
						return true
					}
				}
				n = g.split(ms)
				wait = g.next >= g.n && g.drained && g.n == 1 && n == 1
			} else {
				c.prepareRead(ms)
				if !c.r.recv(fd) {
					return false
				}
				if n, err = c.finishRead(ms, nil); err != nil {
					return true
				}
				wait = n == 1 && n < len(ms)
			}
			handled = true
			if n > 0 && !handle(ms[:n]) {
				return true // the caller passes the socket on
			}
			select {
			case <-stop:
				return true
			default:
			}
		}
	})
	if rerr != nil {
		if g := c.gro; g != nil {
			return handled, g.finish(c, rerr)
		}
		_, err = c.finishRead(ms, rerr)
	}
	return handled, err
}
