package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// childTimeout bounds a child's start, each of its answers and its exit.
const childTimeout = 30 * time.Second

// childProc is a child process of the bridge load mode, seen from the
// load generator.
type childProc struct {
	name  string
	role  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte // stdout, a line at a time; closed at EOF
	log   *tailBuffer // the end of its stderr
	ready childReady
}

// startChild starts argv followed by -role role and args, gives it
// firstLine on its stdin unless empty (the private key), and waits for its
// ready line.
func startChild(argv []string, name, role, firstLine string, args ...string) (*childProc, error) {
	cmd := exec.Command(argv[0], append(append(argv[1:len(argv):len(argv)], "-role", role), args...)...)
	p := &childProc{name: name, role: role, cmd: cmd, lines: make(chan []byte, 1), log: &tailBuffer{max: 4096}}
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the %s process: %w", name, err)
	}
	if firstLine != "" {
		// The pipe holds a line: this does not wait for the child.
		if _, err := io.WriteString(p.in, firstLine+"\n"); err != nil {
			p.in.Close()
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("bench: starting the %s process: %w", name, err)
		}
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		io.Copy(io.Discard, out) // a line too long: let the child finish
	}()
	if err := p.receive(&p.ready); err != nil {
		p.stop()
		return nil, err
	}
	if p.ready.Err != "" {
		p.stop()
		return nil, fmt.Errorf("bench: the %s process: %s", name, p.ready.Err)
	}
	return p, nil
}

// receive decodes the child's next line into v.
func (p *childProc) receive(v any) error {
	t := time.NewTimer(childTimeout)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return fmt.Errorf("bench: the %s process ended: %s", p.name, p.log.String())
		}
		return json.Unmarshal(line, v)
	case <-t.C:
		return fmt.Errorf("bench: the %s process did not answer within %v", p.name, childTimeout)
	}
}

// request sends one request and returns the answer.
func (p *childProc) request(req string) (childStats, error) {
	var st childStats
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		return st, fmt.Errorf("bench: the %s process: %w", p.name, err)
	}
	if err := p.receive(&st); err != nil {
		return st, err
	}
	if st.Err != "" {
		return st, fmt.Errorf("bench: the %s process: %s", p.name, st.Err)
	}
	return st, nil
}

// cpu returns the child's CPU time so far: from /proc where there is one,
// else as the child reports it (getrusage); ok is false if neither can
// tell.
func (p *childProc) cpu() (d time.Duration, ok bool, err error) {
	if d, ok := procCPU(p.cmd.Process.Pid); ok {
		return d, true, nil
	}
	st, err := p.request(reqCPU)
	return st.CPU, st.CPU > 0, err
}

// fds returns the number of the child's open descriptors, if the system
// tells.
func (p *childProc) fds() (int, bool) { return procFDs(p.cmd.Process.Pid) }

// stop closes the child's stdin, which ends it, and waits for it to exit;
// a child that does not within childTimeout is killed.
func (p *childProc) stop() error {
	p.in.Close()
	done := make(chan error, 1)
	go func() {
		for range p.lines { // drain, so that the child never blocks writing
		}
		done <- p.cmd.Wait()
	}()
	t := time.NewTimer(childTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("bench: the %s process: %w: %s", p.name, err, p.log.String())
		}
		return nil
	case <-t.C:
		p.cmd.Process.Kill()
		<-done
		return fmt.Errorf("bench: the %s process did not exit within %v: killed", p.name, childTimeout)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// defaultChild is the command line that runs a child: this executable,
// "bench", ChildArg.
func defaultChild() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, errors.New("bench: cannot find this executable to start the bridge and server processes: " + err.Error())
	}
	return []string{exe, "bench", ChildArg}, nil
}
