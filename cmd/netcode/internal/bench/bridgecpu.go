package bench

import (
	"time"
)

// cpuMeter measures the CPU of the child processes, this process and
// the whole machine over an interval; in transport mode it also runs the
// child's profiler to split its CPU between the bridge and the server.
type cpuMeter struct {
	b        *bridgeRun
	profiled []*childProc // children running their profiler
	save     bool         // write their profiles to Config.CPUProfile
	start    []time.Duration
	wakes    []childStats // each child's reqCPU answer at the start
	ok       bool
	self     time.Duration
	machine  time.Duration
	machined bool
	mallocs  []uint64 // the children's, at the start
	t0       time.Time
}

// cpuSpan is what a cpuMeter measured.
type cpuSpan struct {
	wall           time.Duration
	bridge, server time.Duration // the children's CPU (Shared: split)
	ok             bool          // bridge and server measured
	self           time.Duration // this process; 0 if not measured
	// other is the CPU the rest of the machine used (its busy time less
	// the children and this process); otherOK is false where the machine's
	// busy time is not measured.
	other   time.Duration
	otherOK bool
	// unlabelled is, in transport mode, the share of the profile's CPU
	// that carried no side label (the runtime's own work), split between
	// bridge and server in proportion.
	unlabelled float64
	// wakes are each child's goroutine runs and context switches over
	// the interval, by the ProcessCost it is measured for.
	wakes map[*ProcessCost]wakeCount
	// mallocs are the heap objects each child (procs' order) allocated.
	mallocs []uint64
}

// wakeCount is a child's wake-ups over an interval.
type wakeCount struct {
	runs, switches uint64
	ok             bool // switches counted
	// datagrams are those the child's netcode server received and sent
	// (0 for a child without one).
	datagrams uint64
}

// startCPU starts measuring; save asks for the children's CPU profiles
// (with Config.CPUProfile).
func (b *bridgeRun) startCPU(save bool) (*cpuMeter, error) {
	m := &cpuMeter{b: b, ok: true, save: save && b.cfg.CPUProfile != ""}
	switch {
	case m.save:
		m.profiled = b.procs()
	case b.res.Shared:
		m.profiled = []*childProc{b.bridge} // for the split
	}
	for _, p := range m.profiled {
		if _, err := p.request(reqCPUStart); err != nil {
			return nil, err
		}
	}
	for _, p := range b.procs() {
		st, err := p.request(reqMallocs)
		if err != nil {
			return nil, err
		}
		m.mallocs = append(m.mallocs, st.Mallocs)
	}
	m.machine, m.machined = machineCPU()
	m.self = cpuTime()
	for _, p := range b.procs() {
		st, err := p.request(reqCPU)
		if err != nil {
			return nil, err
		}
		m.wakes = append(m.wakes, st)
	}
	for _, p := range b.procs() {
		d, ok, err := p.cpu()
		if err != nil {
			return nil, err
		}
		m.ok = m.ok && ok
		m.start = append(m.start, d)
	}
	m.t0 = time.Now()
	return m, nil
}

// stop ends the interval.
func (m *cpuMeter) stop() (cpuSpan, error) {
	var sp cpuSpan
	var children time.Duration
	for i, p := range m.b.procs() {
		d, _, err := p.cpu()
		if err != nil {
			return sp, err
		}
		d -= m.start[i]
		children += d
		if i == 0 {
			sp.bridge = d
		} else {
			sp.server = d
		}
	}
	if m.self > 0 {
		sp.self = cpuTime() - m.self
	}
	machine, machined := machineCPU()
	sp.wall = time.Since(m.t0)
	for i, p := range m.b.procs() {
		st, err := p.request(reqMallocs)
		if err != nil {
			return sp, err
		}
		sp.mallocs = append(sp.mallocs, st.Mallocs-m.mallocs[i])
	}
	if sp.otherOK = m.machined && machined && m.ok; sp.otherOK {
		sp.other = max(0, machine-m.machine-children-sp.self)
	}
	sp.ok = m.ok
	sp.wakes = make(map[*ProcessCost]wakeCount)
	costs := m.b.costs()
	for i, p := range m.b.procs() {
		st, err := p.request(reqCPU)
		if err != nil {
			return sp, err
		}
		w0 := m.wakes[i]
		sp.wakes[costs[i]] = wakeCount{runs: st.Runs - w0.Runs, switches: st.Switches - w0.Switches, ok: st.SwitchesOK && w0.SwitchesOK,
			datagrams: st.Datagrams - w0.Datagrams}
	}
	for _, p := range m.profiled {
		req := reqCPUStop
		if m.save {
			req += " " + m.b.cfg.CPUProfile + "." + p.role
		}
		st, err := p.request(req)
		if err != nil {
			return sp, err
		}
		if p != m.b.bridge || !m.b.res.Shared {
			continue
		}
		var split bool
		sp.bridge, sp.server, split = splitCPU(sp.bridge, st.CPUBySide)
		sp.ok = sp.ok && split
		var all time.Duration
		for _, d := range st.CPUBySide {
			all += d
		}
		if all > 0 {
			sp.unlabelled = float64(st.CPUBySide[""]) / float64(all)
		}
	}
	return sp, nil
}

// splitCPU divides the CPU time total of the transport process between
// its bridge and its server in the proportion of the profile's samples
// labelled with each side; the unlabelled samples (the runtime's own
// work) are shared in the same proportion. With no labelled sample (a run
// too short or too idle for the profiler's 100 Hz), ok is false.
func splitCPU(total time.Duration, by map[string]time.Duration) (bridgeCPU, serverCPU time.Duration, ok bool) {
	br, sv := by[sideBridge], by[SideServer]
	if br+sv <= 0 {
		return 0, 0, false
	}
	bridgeCPU = time.Duration(float64(total) * float64(br) / float64(br+sv))
	return bridgeCPU, total - bridgeCPU, true
}
