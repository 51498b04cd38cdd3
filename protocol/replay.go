package protocol

// ReplayProtection remembers the sequence numbers recently received on one
// connection so that a captured packet cannot be played again. It keeps the
// highest sequence seen and, for each of 256 slots (sequence modulo
// 256), the last sequence stored there. A sequence is refused if it
// is 256 or more below the highest, or if its slot holds a sequence
// at least as high.
//
// This is the reference's algorithm, with two differences that do not change
// any decision it makes on sequences below 2^64-256:
//
//   - the age test is written so that it cannot overflow (the reference's
//     sequence + 256 wraps for the top 256 sequences and would refuse them);
//   - slots store sequence + 1, with 0 for "empty", so the zero value is
//     ready to use. The reference marks empty slots with 2^64-1, so a stored
//     2^64-1 reads as empty and that sequence is accepted again; storing
//     sequence + 1 wraps 2^64-1 to 0 and keeps that quirk exactly.
//
// Reader.Read checks and advances it. The zero value is an empty window;
// assigning the zero value empties it again. A ReplayProtection must not be
// used concurrently.
type ReplayProtection struct {
	mostRecent uint64
	received   [replayWindow]uint64 // sequence + 1; 0 is empty
}

// alreadyReceived reports whether a packet with sequence seq must be refused:
// it is too old for the window or was received before.
func (r *ReplayProtection) alreadyReceived(seq uint64) bool {
	// seq + replayWindow <= mostRecent, without overflow.
	if r.mostRecent >= replayWindow && seq <= r.mostRecent-replayWindow {
		return true
	}
	stored := r.received[seq%replayWindow]
	return stored != 0 && stored-1 >= seq
}

// advance records that a packet with sequence seq was received and accepted.
func (r *ReplayProtection) advance(seq uint64) {
	if seq > r.mostRecent {
		r.mostRecent = seq
	}
	r.received[seq%replayWindow] = seq + 1
}
