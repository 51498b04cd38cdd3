package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/gonetcode/netcode"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "\n\nPrints the netcode release, the module version and VCS revision the binary\nwas built from (when the build recorded them), and the Go toolchain.", stdout, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	_, err := io.WriteString(stdout, versionText(bi))
	return err
}

// versionText describes the build: netcode.Version first, then what the
// build information adds. bi may be nil (a binary built without module
// support).
func versionText(bi *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "netcode %s\n", netcode.Version)
	if bi == nil {
		return b.String()
	}
	mod := bi.Main
	if mod.Path != "github.com/gonetcode/netcode" {
		// Built into another program: find this module among its dependencies.
		for _, d := range bi.Deps {
			if d.Path == "github.com/gonetcode/netcode" {
				mod = *d
				break
			}
		}
	}
	if mod.Path != "" {
		v := mod.Version
		if v == "" {
			v = "(unknown)"
		}
		fmt.Fprintf(&b, "module   %s %s\n", mod.Path, v)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "revision %s\n", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, "time     %s\n", t)
		}
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	fmt.Fprintf(&b, "go       %s %s/%s\n", bi.GoVersion, goos, goarch)
	return b.String()
}
