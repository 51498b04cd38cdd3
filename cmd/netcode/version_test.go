package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
)

func TestVersionText(t *testing.T) {
	settings := []debug.BuildSetting{
		{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-23T13:43:41Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want []string
	}{
		{"no build info", nil, []string{"netcode " + netcode.Version + "\n"}},
		{"tagged install", &debug.BuildInfo{GoVersion: "go1.25.0",
			Main: debug.Module{Path: "github.com/gonetcode/netcode", Version: "v0.1.0"}},
			[]string{"module   github.com/gonetcode/netcode v0.1.0", "go       go1.25.0"}},
		{"from a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: settings,
			Main: debug.Module{Path: "github.com/gonetcode/netcode", Version: "v0.0.0-20261123134341-0123abcd+dirty"}},
			[]string{"revision 0123abcd (modified)", "time     2026-11-23T13:43:41Z", "go1.26.8 linux/arm64"}},
		{"inside another program", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/game"},
			Deps: []*debug.Module{{Path: "github.com/gonetcode/netcode", Version: "v0.1.0"}}},
			[]string{"module   github.com/gonetcode/netcode v0.1.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := versionText(tc.bi)
			require.True(t, strings.HasPrefix(got, "netcode "+netcode.Version+"\n"), got)
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, errs := cli(t, "version")
	require.Equal(t, 0, code, errs)
	assert.True(t, strings.HasPrefix(out, "netcode "+netcode.Version+"\n"), out)
	assert.Contains(t, out, "module   github.com/gonetcode/netcode")
}
