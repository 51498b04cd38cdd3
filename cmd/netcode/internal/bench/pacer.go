package bench

// The senders of a run: flat out (a window per client, refilled by the
// watchdog in run.go) or at a rate, paced by one goroutine per group of
// clients at phases spread over the period.

import (
	"time"

	"github.com/gonetcode/netcode"
)

// startTraffic starts the senders: flat out, every client sends its window
// and a watchdog refills the windows of clients whose payloads were lost;
// at a rate, every client sends one payload each 1/Rate seconds at its own
// phase (sendPhase), spread evenly over the period as a fleet of
// independent clients would be, from one pacer goroutine per pacerGroup
// clients.
func (r *run) startTraffic() {
	if r.cfg.Rate == 0 {
		var buf [netcode.MaxPayloadBytes]byte
		for _, c := range r.clients {
			if c.ep == nil {
				continue
			}
			for range r.cfg.Window {
				r.send(c, buf[:])
			}
		}
		r.senders.Add(1)
		go r.watchdog()
		return
	}
	period := time.Duration(float64(time.Second) / r.cfg.Rate)
	n := len(r.clients)
	groups := (n + pacerGroup - 1) / pacerGroup
	for g := range groups {
		// Group g paces clients g, g+groups, g+2*groups...: their phases
		// are spread over the whole period, and so are the groups'. On
		// the light generator it paces clients g*pacerGroup and on, the
		// clients of one socket (lightGroupSize is pacerGroup), whose
		// payloads it then sends together (lightGen.flush) in batches of
		// tens a wake-up rather than one or two; each payload keeps its
		// phase, so the load on the server is the same.
		first, step := g, groups
		if r.light != nil {
			first, step = g*pacerGroup, 1
		}
		var cs []*client
		var phases []time.Duration
		for i := first; i < n && len(cs) < pacerGroup; i += step {
			cs = append(cs, r.clients[i])
			phases = append(phases, sendPhase(i, n, period))
		}
		r.senders.Add(1)
		go r.pacer(cs, phases, period)
	}
}

// pacerGroup is the most clients one pacer goroutine sends for.
const pacerGroup = 1024

// pacerQuantum is the shortest a pacer sleeps: it sends what fell due
// since it last woke, so a payload leaves up to this late. A timer per
// payload (41k wake-ups a second for 4096 clients at 10 Hz) would cost
// the process more than the clients' own work, on the same CPUs as the
// server.
const pacerQuantum = time.Millisecond

// sendPhase is when, after the exchange starts and then every period,
// client i of n sends: i/n of the period. Clients are not in step: a
// payload from each of n clients at one instant would measure the queue
// behind a burst of n, which no fleet of independent clients makes.
func sendPhase(i, n int, period time.Duration) time.Duration {
	return period * time.Duration(i) / time.Duration(n)
}

// pacer sends for cs, client j at phases[j] (ascending, within the
// period) after the exchange starts and every period after, up to
// pacerQuantum late. A pacer woken later sends what fell due meanwhile,
// at once, and keeps to its schedule.
func (r *run) pacer(cs []*client, phases []time.Duration, period time.Duration) {
	defer r.senders.Done()
	var buf [netcode.MaxPayloadBytes]byte
	start := time.Now()
	t := time.NewTimer(phases[0])
	defer t.Stop()
	for k := 0; ; {
		select {
		case <-t.C:
		case <-r.stopSend:
			return
		}
		now := time.Since(start)
		for ; ; k++ {
			j := k % len(cs)
			due := phases[j] + time.Duration(k/len(cs))*period
			if due > now {
				t.Reset(max(due-now, pacerQuantum))
				break
			}
			if c := cs[j]; c.ep != nil {
				r.send(c, buf[:])
			}
		}
		if r.light != nil {
			r.light.flush()
		}
	}
}
