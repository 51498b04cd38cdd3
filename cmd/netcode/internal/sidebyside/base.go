package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// baseTransport is the datagrams transport whose echo server is the
// netcode server of another worktree of this repository (-base), for a
// before-and-after comparison in the same run: its server process is this
// command built against that worktree's library, and its clients are this
// worktree's netcode clients (in this process).
const baseTransport = "netcode-base"

// baseStreamTransport is the streams transport that runs reliable.Stream
// with both ends (each a process) built against the -base worktree.
const baseStreamTransport = "reliable-base"

// insertAfter returns list with x after the first after, or at the end.
func insertAfter(list []string, after, x string) []string {
	if i := slices.Index(list, after); i >= 0 {
		return slices.Insert(list, i+1, x)
	}
	return append(list, x)
}

// buildBase builds this module against the netcode module in worktree,
// in a copy under tmp, and returns the executable.
func buildBase(ctx context.Context, worktree, tmp string) (string, error) {
	self, _, err := moduleDirs()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(worktree)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return "", fmt.Errorf("-base %s: %w", worktree, err)
	}
	src := filepath.Join(tmp, "base-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(self)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, "_test.go") || !(strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(self, name))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", err
		}
	}
	exe := filepath.Join(tmp, "sidebyside-base")
	for _, args := range [][]string{
		{"mod", "edit", "-replace=github.com/gonetcode/netcode=" + abs},
		// -mod=mod: the base may require other versions than go.sum lists.
		{"build", "-mod=mod", "-o", exe, "."},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building against -base %s: go %s: %w\n%s", worktree, strings.Join(args, " "), err, out)
		}
	}
	return exe, nil
}

// buildBaseFlag builds the -base executable for worktree, if one is
// given, in a temporary directory that cleanup removes.
func buildBaseFlag(ctx context.Context, worktree string) (exe string, cleanup func(), err error) {
	if worktree == "" {
		return "", func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "sidebyside-base-")
	if err != nil {
		return "", nil, err
	}
	if exe, err = buildBase(ctx, worktree, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return exe, func() { os.RemoveAll(tmp) }, nil
}
