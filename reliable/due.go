package reliable

import "time"

// nextDue returns when the core next has work of its own to do, the zero
// Time if none: an ack owed, a resend, a keep-alive of windows while the
// connection has been active, the ack timeout, the trim of buffers left
// from traffic, or, while the send budget holds back data, the next tick
// of pacing. An idle connection has none, so it costs no wake-up.
//
// It is called right after the core has flushed what it could: anything
// still due by now is held back by the budget, the windows or the packet
// records, and waits a tick, as it did under a ticker.
func (c *core) nextDue() time.Time {
	if c.err != nil {
		return time.Time{}
	}
	var next time.Time
	at := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if c.recvSinceSend > 0 {
		at(c.owedAt.Add(ackDelay))
	}
	if quietAt := c.lastSend.Add(idleAck); quietAt.Before(c.lastActive.Add(idleActive)) {
		at(quietAt)
	}
	waiting := false
	for i := range c.chans {
		cs := &c.chans[i]
		if cs.spec.kind == Unreliable {
			waiting = waiting || cs.usnd.size > 0
			continue
		}
		s := &cs.snd
		waiting = waiting || s.queued() > 0 || (s.finWanted && !s.finCut)
		for k := range s.lists {
			l := &s.lists[k]
			if l.n == 0 {
				continue
			}
			h := s.slot(l.head)
			due := c.rto(k + 1)
			if k == fastList {
				due = min(c.srtt+2*c.rttvar+ackDelay, maxRTO)
			}
			at(c.start.Add(time.Duration(h.sentAt) + due))
		}
		if c.cfg.ackTimeout > 0 && s.base != s.next {
			if slot := s.slot(s.base); !slot.acked && slot.sends > giveUpResends {
				at(c.start.Add(time.Duration(slot.firstAt) + c.cfg.ackTimeout))
			}
		}
	}
	if c.trimWanted() {
		at(c.lastTrim.Add(trimEvery))
	}
	if waiting && c.tokens <= 0 {
		at(c.now.Add(c.cfg.tick)) // the budget refills by then
	}
	if !next.IsZero() && !next.After(c.now) {
		next = c.now.Add(c.cfg.tick)
	}
	return next
}

// trimWanted reports whether a trim would free something, now or once the
// traffic that marked buffers used is over. Buffers that hold what is
// still queued or unread do not count: the caller who drains them runs
// the core, which then looks again.
func (c *core) trimWanted() bool {
	for i := range c.chans {
		cs := &c.chans[i]
		if cs.spec.kind == Unreliable {
			if q, r := &cs.usnd, &cs.urcv; q.used || r.used || q.held > 0 && q.size == 0 || r.held > 0 && r.size == 0 {
				return true
			}
			continue
		}
		s, r := &cs.snd, &cs.rcv
		// What is still queued, in flight or unread waits for its
		// sender or reader, who call in anyway.
		if s.used || r.used || s.dirty && s.base == s.next && s.queued() == 0 || r.dirty && r.held == 0 {
			return true
		}
	}
	return false
}
