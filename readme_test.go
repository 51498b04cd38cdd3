package netcode_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	// The packages a README's code may use are linked into this test, so
	// that go test's cache reruns it whenever one of them changes (the
	// code is checked against them by the go command's export data, which
	// the cache does not see).
	_ "github.com/gonetcode/netcode/backend"
	_ "github.com/gonetcode/netcode/bridge"
	_ "github.com/gonetcode/netcode/bridge/transport"
	_ "github.com/gonetcode/netcode/bridge/webtransport"
	_ "github.com/gonetcode/netcode/crypto"
	_ "github.com/gonetcode/netcode/cute"
	_ "github.com/gonetcode/netcode/fleet"
	_ "github.com/gonetcode/netcode/metrics"
	_ "github.com/gonetcode/netcode/reliable"
	_ "github.com/gonetcode/netcode/reliable/endpoint"
	_ "github.com/gonetcode/netcode/token"
)

// The documents whose Go code blocks TestReadmeCodeCompiles checks.
var readmes = []string{"README.md", "docs/ko/README.md"}

// A Go code block in a README is one of three kinds, told by the line
// just before its opening fence:
//
//   - A whole file: the block begins with "package". It is type-checked as
//     it stands.
//   - A fragment, the default: the block's lines become the body of a
//     function in a file of its own, which imports the packages the block
//     names (from readmeImports). Identifiers the fragment uses without
//     declaring them (a key, a handler of yours) are declared by a comment
//     before the fence, invisible on the rendered page:
//     <!-- go: var key crypto.Key; var serve func(net.Conn) -->
//     Variables a fragment declares and leaves unused are allowed, since a
//     fragment stops where the reader's own code takes over.
//   - Not compiled: <!-- go: not compiled: REASON --> before the fence,
//     with the reason.
var (
	goMarker     = regexp.MustCompile(`^<!-- go: (.*) -->$`)
	notCompiled  = regexp.MustCompile(`^not compiled: \S`)
	qualifiedUse = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Za-z_]`)
	lineComment  = regexp.MustCompile(`(?m)//.*$`)
	stringLit    = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)
)

// readmeImports are the packages a fragment may use, by the name it uses.
var readmeImports = map[string]string{
	"backend":      "github.com/gonetcode/netcode/backend",
	"bridge":       "github.com/gonetcode/netcode/bridge",
	"context":      "context",
	"crypto":       "github.com/gonetcode/netcode/crypto",
	"cute":         "github.com/gonetcode/netcode/cute",
	"errors":       "errors",
	"fleet":        "github.com/gonetcode/netcode/fleet",
	"fmt":          "fmt",
	"http":         "net/http",
	"io":           "io",
	"log":          "log",
	"metrics":      "github.com/gonetcode/netcode/metrics",
	"net":          "net",
	"netcode":      "github.com/gonetcode/netcode",
	"endpoint":     "github.com/gonetcode/netcode/reliable/endpoint",
	"netip":        "net/netip",
	"os":           "os",
	"redis":        "github.com/redis/go-redis/v9",
	"reliable":     "github.com/gonetcode/netcode/reliable",
	"slog":         "log/slog",
	"time":         "time",
	"token":        "github.com/gonetcode/netcode/token",
	"transport":    "github.com/gonetcode/netcode/bridge/transport",
	"webtransport": "github.com/gonetcode/netcode/bridge/webtransport",
}

// codeBlock is one fenced Go block of a README.
type codeBlock struct {
	file   string
	line   int    // of the opening fence
	marker string // what the <!-- go: ... --> before it says, if any
	code   string
}

func (b codeBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// goBlocks returns the ```go blocks of the Markdown in r.
func goBlocks(name string, r io.Reader) ([]codeBlock, error) {
	var (
		blocks []codeBlock
		cur    *codeBlock
		prev   string // the last line before the current one
		n      int
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		case strings.TrimSpace(line) == "```go":
			cur = &codeBlock{file: name, line: n}
			if m := goMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.marker = m[1]
			}
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: the block at line %d never ends", name, cur.line)
	}
	return blocks, sc.Err()
}

// source returns the Go file that checks b.
func (b codeBlock) source() string {
	if strings.HasPrefix(b.code, "package ") {
		return b.code
	}
	names := map[string]bool{}
	// A comment or a string may look like a use ("netcode.key").
	uses := lineComment.ReplaceAllString(stringLit.ReplaceAllString(b.marker+"\n"+b.code, `""`), "")
	for _, m := range qualifiedUse.FindAllStringSubmatch(uses, -1) {
		if _, ok := readmeImports[m[1]]; ok {
			names[m[1]] = true
		}
	}
	var src strings.Builder
	src.WriteString("package readme\n\nimport (\n")
	for _, name := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintf(&src, "\t%s %q\n", name, readmeImports[name])
	}
	src.WriteString(")\n\n")
	if b.marker != "" {
		for _, decl := range strings.Split(b.marker, ";") {
			fmt.Fprintf(&src, "%s\n", strings.TrimSpace(decl))
		}
	}
	src.WriteString("\nfunc _() {\n")
	src.WriteString(b.code)
	src.WriteString("}\n")
	return src.String()
}

// exportData returns the compiled export data of every package in paths
// and their dependencies, by import path, from the go command (which
// builds what its cache lacks).
func exportData(t *testing.T, paths []string) map[string]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command, which compiles the packages a README's code imports")
	cmd := exec.Command(gobin, append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -export: %s", stderr.String())
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		files[path] = file
	}
	return files
}

// TestReadmeCodeCompiles type-checks every Go code block of the READMEs
// against the current API, by the convention of goBlocks' kinds: a block
// that no longer compiles fails with its file and line.
func TestReadmeCodeCompiles(t *testing.T) {
	var blocks []codeBlock
	for _, name := range readmes {
		f, err := os.Open(name)
		require.NoError(t, err)
		bs, err := goBlocks(name, f)
		f.Close()
		require.NoError(t, err)
		require.NotEmpty(t, bs, "%s has no Go code block", name)
		blocks = append(blocks, bs...)
	}
	paths := []string{}
	for _, p := range readmeImports {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	exports := exportData(t, paths)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q: add it to readmeImports", path)
		}
		return os.Open(file)
	})
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) {
			if notCompiled.MatchString(b.marker) {
				t.Logf("%s: %s", b, b.marker)
				return
			}
			require.False(t, strings.HasPrefix(b.marker, "not compiled"), "%s: say why it is not compiled: <!-- go: not compiled: REASON -->", b)
			src := b.source()
			f, err := parser.ParseFile(fset, b.String(), src, parser.SkipObjectResolution)
			require.NoError(t, err, "%s does not parse as Go:\n%s", b, src)
			var errs []string
			conf := types.Config{Importer: imp, Error: func(err error) {
				if te, ok := err.(types.Error); ok && strings.Contains(te.Msg, "declared and not used") && !strings.HasPrefix(b.code, "package ") {
					return // a fragment's variables are the reader's to use
				}
				errs = append(errs, err.Error())
			}}
			conf.Check("readme", fset, []*ast.File{f}, nil)
			assert.Empty(t, errs, "%s does not compile against the current API:\n%s", b, src)
		})
	}
}

// TestReadmeCodeConvention checks the test's own reading of the
// convention on a README of its own making: each kind of block, and a
// fragment wrapped with its placeholders and imports.
func TestReadmeCodeConvention(t *testing.T) {
	md := "# t\n\n```go\npackage main\n\nfunc main() {}\n```\n\n" +
		"<!-- go: var key crypto.Key -->\n```go\nl, err := netcode.Listen(\"udp\", \":0\", &netcode.ServerConfig{PrivateKey: key})\n```\n\n" +
		"<!-- go: not compiled: pseudo-code -->\n```go\nmagic()\n```\n\n```sh\nnot go\n```\n"
	bs, err := goBlocks("t.md", strings.NewReader(md))
	require.NoError(t, err)
	require.Len(t, bs, 3)
	assert.Equal(t, "package main\n\nfunc main() {}\n", bs[0].source())
	assert.Equal(t, 10, bs[1].line)
	assert.Equal(t, "var key crypto.Key", bs[1].marker)
	assert.Equal(t, "package readme\n\nimport (\n"+
		"\tcrypto \"github.com/gonetcode/netcode/crypto\"\n"+
		"\tnetcode \"github.com/gonetcode/netcode\"\n)\n\n"+
		"var key crypto.Key\n\nfunc _() {\n"+
		"l, err := netcode.Listen(\"udp\", \":0\", &netcode.ServerConfig{PrivateKey: key})\n}\n", bs[1].source())
	assert.True(t, notCompiled.MatchString(bs[2].marker))
	_, err = goBlocks("t.md", strings.NewReader("```go\nx := 1\n"))
	assert.ErrorContains(t, err, "never ends")
}
