package main

import (
	"sync"

	"github.com/gonetcode/netcode"
)

// chatRoom is the set of clients of "serve -chat".
type chatRoom struct {
	mu      sync.Mutex // guards members; never held during a Write
	members []*netcode.Conn
}

func (r *chatRoom) join(c *netcode.Conn) {
	r.mu.Lock()
	r.members = append(r.members, c)
	r.mu.Unlock()
}

func (r *chatRoom) leave(c *netcode.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range r.members {
		if m == c {
			r.members = append(r.members[:i], r.members[i+1:]...)
			return
		}
	}
}

// send writes p to every member but from. A member that cannot take it
// (closing) is skipped: its own reader removes it.
func (r *chatRoom) send(from *netcode.Conn, p []byte) {
	r.mu.Lock()
	to := make([]*netcode.Conn, 0, len(r.members))
	for _, m := range r.members {
		if m != from {
			to = append(to, m)
		}
	}
	r.mu.Unlock()
	for _, m := range to {
		_, _ = m.Write(p)
	}
}
