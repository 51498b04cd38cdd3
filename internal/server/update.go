package server

import (
	"log/slog"
	"time"

	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/token"
)

// popSlot takes a free slot; there must be one. s.mu is held.
func (s *Server) popSlot() int {
	idx := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return idx
}

// connectionSequence is the first sequence number of the packets sent on a
// connection made at wall-clock time now. Every packet the server seals under a token's
// server-to-client key uses a sequence number that no other packet under
// that key used:
//
//   - A token connects at most once to a server while the server runs (the
//     history remembers it until it expires), and a connection counts up
//     from its first sequence number.
//   - A connection made later with the same token, by this server after a
//     restart (Close and Listen, or a new process) or by another server of
//     the token's list, starts at the wall clock in nanoseconds
//     (clockSequence), above every number an earlier connection used: that
//     one started at an earlier clock reading and sealed far fewer than
//     one packet per nanosecond since. This is the one assumption: the
//     clocks of the servers that see one token (one server across its
//     restarts, or the servers of one token's list) do not disagree by
//     more than the time between two connections with the token, which is
//     at least a handshake (a round trip) after the earlier one ended.
//   - Challenges and denials use the global sequence, which starts at 2^63
//     plus the clock and so never meets a connection's (below 2^62).
//
// The cost is eight bytes of sequence number in every packet to the
// client, where the reference, counting from 0, writes one to three.
func (s *Server) connectionSequence(now time.Time) uint64 {
	if s.cfg.ReferenceSequences {
		return 0
	}
	return clockSequence(now)
}

// clockSequence is now in nanoseconds since the Unix epoch, below 2^62
// (until the year 2116), and 0 for times before the epoch.
func clockSequence(now time.Time) uint64 {
	ns := now.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns) & (1<<62 - 1)
}

// sweepInterval is how often Update forgets expired handshakes.
const sweepInterval = time.Second

// Update seals the keep-alives that are due into out and times out silent
// clients and stale mappings, at now. It acts on every deadline that
// passed by now, whenever it is called; its work follows the clients whose
// deadlines came (see deadlineWheel), not MaxClients. It returns the time
// of the next call with work to do: the end of the wheel bucket holding
// the next deadline, or the next sweep of expired handshakes, at most a
// second ahead; it is now plus a monotonic interval, so a timer set for
// it (time.Until) is not moved by a step of the wall clock. A client that
// connects in the meantime may make it earlier: the adapter calls Update
// again when Receive returns a new client.
//
// The tables are changed under the server's lock, taken only when a
// client timed out or once a second for the sweeps; the keep-alives are
// sealed after it.
func (s *Server) Update(now time.Time, out *Output) (next time.Time) {
	s.tick.Lock()
	defer s.tick.Unlock()
	mono := s.mono(now)
	taken := s.wheel.take(mono, s.taken[:0])
	due, expired, later := s.due[:0], s.expired[:0], taken[:0]
	for _, c := range taken {
		switch {
		case !c.live.Load():
			// Left since it was filed: forgotten.
		case c.timeout > 0 && mono-c.lastRecv.Load() >= int64(c.timeout):
			expired = append(expired, c)
		case mono-c.sendLocked.lastSend.Load() >= int64(KeepAliveInterval):
			due = append(due, c)
		default:
			later = append(later, c) // moved on by packets: filed again
		}
	}
	sec := unixSeconds(s.wall(now))
	sweep := mono-s.lastSweep >= int64(sweepInterval)
	if len(expired) > 0 || sweep || sec != s.lastExpire {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.release(taken, due, expired)
			return now.Add(sweepInterval)
		}
		for _, c := range expired {
			if s.leave(c, ReasonTimedOut, out) {
				s.stats.connectionsTimeout.Add(1)
			}
		}
		if sec != s.lastExpire {
			s.lastExpire = sec
			s.history.Expire(sec)
		}
		if sweep {
			s.lastSweep = mono
			s.sweepHandshakes(mono)
		}
		s.mu.Unlock()
	}
	for _, c := range due {
		c.keepAlive(mono, out, false)
	}

	w := s.wheel
	w.mu.Lock()
	for _, list := range [2][]*Client{later, due} {
		for _, c := range list {
			if c.live.Load() {
				w.file(c, c.deadline())
			}
		}
	}
	nextMono := s.lastSweep + int64(sweepInterval)
	if at, ok := w.next(); ok && at < nextMono {
		nextMono = at
	}
	w.mu.Unlock()
	s.release(taken, due, expired)
	return s.at(nextMono)
}

// release clears Update's scratch lists, so that they hold no client, and
// keeps them for the next call. s.tick is held.
func (s *Server) release(taken, due, expired []*Client) {
	clear(taken) // later is a prefix of it
	clear(due)
	clear(expired)
	s.taken, s.due, s.expired = taken[:0], due[:0], expired[:0]
}

// ConnectLoopback puts a loopback client in a free slot: a client in the
// server's own process (a listen server's local player) that takes a slot
// but exchanges no packets. The server side reads what the client's end
// sends (LoopbackSend) from Queue; the client's end reads what the server
// side sends (Send) from LoopbackQueue. The client never times out.
func (s *Server) ConnectLoopback(clientID uint64, userData [token.UserDataBytes]byte, out *Output) (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClientGone
	case s.byID[clientID] != nil:
		return nil, ErrClientIDInUse
	case len(s.free) == 0:
		return nil, ErrFull
	}
	idx := s.popSlot()
	c := &Client{
		srv:      s,
		index:    idx,
		id:       clientID,
		userData: userData,
		loopback: true,
		queue:    packetq.NewCounted(s.cfg.ReadQueue, &s.stats.payloadsDropped),
		peer:     packetq.New(s.cfg.ReadQueue),
	}
	c.confirmed.Store(true)
	c.live.Store(true)
	s.slots[idx] = c
	s.byID[clientID] = c
	s.stats.connectionsOpened.Add(1)
	out.recordClient(slog.LevelDebug, "netcode: loopback client connected", c, "")
	return c, nil
}

// LoopbackLeft ends loopback client c's connection from the client's side:
// the slot is freed and the server side's Queue ends with
// ReasonPeerDisconnected.
func (s *Server) LoopbackLeft(c *Client, out *Output) {
	if c.loopback {
		s.end(c, ReasonPeerDisconnected, out, false)
	}
}

// Disconnect ends c's connection from the server side, sealing the
// redundant disconnect packets into out. It does nothing if c already
// left.
func (s *Server) Disconnect(c *Client, out *Output) {
	s.end(c, ReasonLocal, out, true)
}

// end takes c out of the tables and, with packets, seals its disconnect
// packets after the server's lock is released.
func (s *Server) end(c *Client, why Reason, out *Output, packets bool) {
	s.mu.Lock()
	left := s.leave(c, why, out)
	s.mu.Unlock()
	if left {
		if packets {
			c.shut(out)
		} else {
			c.shut(nil)
		}
	}
}

// leave takes c out of its slot and the tables, records why and ends its
// queues; s.mu is held. It reports false if c had left already. The
// caller seals the disconnect packets, if any, after releasing s.mu. It
// takes no client lock: a send in progress seals at most its own packet
// after the client left.
func (s *Server) leave(c *Client, why Reason, out *Output) bool {
	if !c.live.Load() {
		return false
	}
	c.live.Store(false)
	c.reason.Store(int32(why))
	s.slots[c.index] = nil
	s.free = append(s.free, c.index)
	delete(s.byID, c.id)
	if !c.loopback && s.byAddr[c.addr] == c {
		delete(s.byAddr, c.addr)
	}
	if why == ReasonLocal && !c.loopback {
		s.gone.add(c, s.maxClients)
	}
	c.queue.End(s.cfg.EndErrors[why])
	if c.loopback {
		c.peer.End(s.cfg.EndErrors[ReasonPeerDisconnected])
	}
	if why == ReasonTimedOut {
		c.sendLocked.closed.Store(true)
	}
	out.recordClient(slog.LevelDebug, "netcode: client disconnected", c, why.String())
	return true
}

// Close disconnects every client, sealing the redundant disconnect packets
// into out, and makes the server ignore everything from then on.
func (s *Server) Close(out *Output) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	var left []*Client
	for _, c := range s.slots {
		if c != nil && s.leave(c, ReasonLocal, out) {
			left = append(left, c)
		}
	}
	s.closed = true
	clear(s.byAddr)
	s.handshakes.clear()
	s.history.Clear()
	s.wheel.reset()
	s.mu.Unlock()
	for _, c := range left {
		c.shut(out)
	}
}
