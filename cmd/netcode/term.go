package main

import (
	"context"
	"io"
	"os"
)

// isTerminal reports whether v (a reader or writer) is an *os.File on a
// terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && isTerminalFile(f)
}

// stdinKey is the context key of a command's standard input.
type stdinKey struct{}

// withStdin returns ctx with r as the standard input of the commands run
// with it (tests run several at once, each with its own).
func withStdin(ctx context.Context, r io.Reader) context.Context {
	return context.WithValue(ctx, stdinKey{}, r)
}

// stdinOf returns the standard input of the command run with ctx: os.Stdin
// unless withStdin says otherwise.
func stdinOf(ctx context.Context) io.Reader {
	if r, ok := ctx.Value(stdinKey{}).(io.Reader); ok {
		return r
	}
	return os.Stdin
}

// controlFd runs check on f's descriptor without f.Fd, which would switch
// the file to blocking mode, and reports whether check returned nil.
func controlFd(f *os.File, check func(fd uintptr) error) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = check(fd) }); err != nil {
		return false
	}
	return cerr == nil
}
