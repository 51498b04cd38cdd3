package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// childArg is the hidden command that runs a server process.
const childArg = "child"

// A child process speaks in lines. It reads the netcode private key (hex)
// as its first line of stdin, serves (or dials, as a stream's dialing
// end), and prints "ready ADDR". Then each "cpu" line on its stdin is
// answered with "cpu NANOSECONDS" (its getrusage so far); a stream's end
// also prints "done BYTES CPU_NS WALL_NS" when its transfer ends. It exits
// when its stdin closes.

// childTimeout bounds a child's start and each of its answers, but for
// the end of a transfer (transferTimeout).
const (
	childTimeout    = 30 * time.Second
	transferTimeout = 10 * time.Minute
)

// child is a server process seen from the parent.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	addr  string
}

// startChild starts exe (this executable if "") as a server process with
// args, gives it key and waits for its ready line.
func startChild(exe string, key []byte, args ...string) (*child, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	c := &child{cmd: exec.Command(exe, append([]string{childArg}, args...)...), lines: make(chan string, 4)}
	c.cmd.Stderr = os.Stderr // its errors and quic-go's warnings, as they come
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	if _, err := io.WriteString(c.in, hex.EncodeToString(key)+"\n"); err != nil {
		c.stop()
		return nil, err
	}
	f, err := c.expect("ready", childTimeout)
	if err != nil {
		c.stop()
		return nil, err
	}
	c.addr = f[1]
	return c, nil
}

// expect returns the fields of the child's next line, which must start
// with key and have at least one more field.
func (c *child) expect(key string, timeout time.Duration) ([]string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			return nil, errors.New("the server process ended (its errors are above)")
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != key {
			return nil, fmt.Errorf("the server process said %q, want %q", line, key)
		}
		return f, nil
	case <-t.C:
		return nil, fmt.Errorf("the server process said nothing for %v (want %q)", timeout, key)
	}
}

// cpu returns the child's CPU time so far.
func (c *child) cpu() (time.Duration, error) {
	if _, err := io.WriteString(c.in, "cpu\n"); err != nil {
		return 0, err
	}
	f, err := c.expect("cpu", childTimeout)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(ns), err
}

// stop closes the child's stdin, which ends it, and waits for it; one
// that does not exit within childTimeout is killed.
func (c *child) stop() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() {
		for range c.lines {
		}
		done <- c.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the server process: %w", err)
		}
		return nil
	case <-time.After(childTimeout):
		c.cmd.Process.Kill()
		<-done
		return errors.New("the server process did not exit: killed")
	}
}

// childOut is the child's side: lines to its stdout, one at a time.
type childOut struct{ mu sync.Mutex }

func (o *childOut) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

// runChild is a server process: args are the kind of server and its
// arguments (see serveDatagrams and serveStream).
func runChild(args []string) error {
	if len(args) == 0 {
		return errors.New("child: no kind")
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("child: no key line")
	}
	key, err := hex.DecodeString(strings.TrimSpace(in.Text()))
	if err != nil {
		return fmt.Errorf("child: key: %w", err)
	}
	out := &childOut{}
	var (
		addr  string
		close func()
	)
	switch {
	case slices.Contains(datagramTransports, args[0]):
		addr, close, err = serveDatagrams(args[0], key)
	case args[0] == "stream":
		addr, close, err = serveStream(args, key, out)
	case args[0] == "dial":
		addr, close, err = dialStreamEnd(args, key, out)
	default:
		err = fmt.Errorf("child: unknown kind %q", args[0])
	}
	if err != nil {
		return err
	}
	defer close()
	out.say("ready %s", addr)
	for in.Scan() {
		if in.Text() == "cpu" {
			out.say("cpu %d", cpuTime().Nanoseconds())
		}
	}
	return nil
}
