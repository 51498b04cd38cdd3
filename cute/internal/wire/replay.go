package wire

// ReplayBytes is the replay window: how far behind the newest sequence a
// packet may be and still be accepted, if its slot allows.
const ReplayBytes = 256

// Replay is the code's 256-entry replay buffer, decision for decision:
// a sequence more than 256 behind the newest is too old; otherwise it is
// new if its slot (sequence % 256) is empty or holds an older sequence.
// Because a newer sequence in a slot blocks older ones, the newest minus
// 256 is always refused. Update only after the packet decrypted.
//
// The zero value is an empty buffer. Slots hold sequence+1 so that zero
// means empty, exactly as the code's all-ones marker: the sequence 2^64-1
// is stored as "empty" there too.
type Replay struct {
	max     uint64
	entries [ReplayBytes]uint64
}

// Reset empties the buffer.
func (r *Replay) Reset() { *r = Replay{} }

// Max returns the newest sequence seen (0 at first).
func (r *Replay) Max() uint64 { return r.max }

// Duplicate reports whether seq must be refused (cn_protocol_replay_buffer_cull_duplicate).
func (r *Replay) Duplicate(seq uint64) bool {
	if seq+ReplayBytes < r.max {
		return true
	}
	e := r.entries[seq%ReplayBytes]
	return e != 0 && e-1 >= seq
}

// Update records seq as seen (cn_protocol_replay_buffer_update).
func (r *Replay) Update(seq uint64) {
	if r.max < seq {
		r.max = seq
	}
	i := seq % ReplayBytes
	if e := r.entries[i]; e == 0 || e-1 < seq {
		r.entries[i] = seq + 1
	}
}

// Slot returns what the slot of seq holds, as the code's all-ones-is-empty
// value (for tests and tools).
func (r *Replay) Slot(seq uint64) uint64 { return r.entries[seq%ReplayBytes] - 1 }
