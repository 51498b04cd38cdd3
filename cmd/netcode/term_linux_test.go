package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gonetcode/netcode/token"
)

// errNoPty reports a machine without pseudo-terminals.
var errNoPty = errors.New("no pseudo-terminal")

// openPty opens a pseudo-terminal pair.
func openPty() (ptmx, pts *os.File, err error) {
	ptmx, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoPty, err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		ptmx.Close()
		return nil, nil, fmt.Errorf("%w: %v", errNoPty, err)
	}
	rc, err := ptmx.SyscallConn()
	if err != nil {
		return fail(err)
	}
	var n int
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		if cerr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); cerr == nil {
			n, cerr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || cerr != nil {
		return fail(fmt.Errorf("%v %v", err, cerr))
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return fail(err)
	}
	return ptmx, pts, nil
}

// TestTokenToTerminal checks that a token written to a terminal is base64.
func TestTokenToTerminal(t *testing.T) {
	ptmx, pts, err := openPty()
	if err != nil {
		t.Skipf("this machine has no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer pts.Close()
	assert.True(t, isTerminal(pts))
	assert.False(t, isTerminal(strings.NewReader("")))

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(ptmx).ReadString('\n')
		line <- s
	}()
	var errb strings.Builder
	code := run(context.Background(), []string{"token", "-key", strings.Repeat("ab", 32), "-server", "127.0.0.1:40000"}, pts, &errb)
	require.Equal(t, 0, code, errb.String())
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(<-line))
	require.NoError(t, err)
	assert.Len(t, b, token.ConnectTokenBytes)
}
