package netcode_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// readmes returns the documents whose Go code blocks TestReadmeCodeCompiles
// checks: README.md and every Markdown page under docs/, in each language.
func readmes(t *testing.T) []string {
	t.Helper()
	names := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			names = append(names, filepath.ToSlash(path))
		}
		return err
	})
	require.NoError(t, err)
	return names
}

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
	"tls":          "crypto/tls",
	"token":        "github.com/gonetcode/netcode/token",
	"transport":    "github.com/gonetcode/netcode/bridge/transport",
	"webtransport": "github.com/gonetcode/netcode/bridge/webtransport",
	"wire":         "github.com/gonetcode/netcode/bridge/wire",
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
	for _, name := range readmes(t) {
		f, err := os.Open(name)
		require.NoError(t, err)
		bs, err := goBlocks(name, f)
		f.Close()
		require.NoError(t, err)
		blocks = append(blocks, bs...)
	}
	require.NotEmpty(t, blocks, "no Go code block in README.md or docs/")
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

// TestReadmeLinksEveryPage: every page of docs/ is one link from the
// README, so that a reader reaches each task in one step, and the README
// stays short enough to read top to bottom (400 lines); what it does not
// hold belongs on a page of docs/.
func TestReadmeLinksEveryPage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := bytes.Count(readme, []byte("\n"))
	assert.LessOrEqual(t, lines, 400, "README.md has %d lines: move a section to its page of docs/", lines)
	pages, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range append(pages, "docs/ko/README.md") {
		assert.Contains(t, string(readme), "]("+filepath.ToSlash(p), "README.md does not link %s", p)
	}
}

// firstProgram returns the first Go block of the Markdown file name that
// is a whole program (package main): the README's first example.
func firstProgram(t *testing.T, name string) codeBlock {
	t.Helper()
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	bs, err := goBlocks(name, f)
	require.NoError(t, err)
	for _, b := range bs {
		if strings.HasPrefix(b.code, "package main\n") {
			return b
		}
	}
	t.Fatalf("%s has no whole program (a Go block that begins with package main)", name)
	return codeBlock{}
}

// TestInstallFromClone runs the first programs of the English and Korean
// READMEs end to end, as a user does after the README's Install section:
// from a temporary module of its own that reaches this clone through a
// replace directive (go mod edit, go mod tidy), and through a go.work
// file. Each program serves, mints a token, dials and must print its echo
// within the timeout. It reaches nothing but the module cache: the
// module's go.sum is copied in first, so tidy consults no checksum
// database. A few seconds once the build cache is warm.
func TestInstallFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the READMEs' first programs with the go command; not in -short")
	}
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command, which builds the first programs")
	clone, err := os.Getwd()
	require.NoError(t, err)
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	const mod = "github.com/gonetcode/netcode"
	cases := []struct {
		doc, route string
	}{
		{"README.md", "replace"},
		{"README.md", "go.work"},
		{"docs/ko/README.md", "replace"},
	}
	for _, tc := range cases {
		t.Run(tc.doc+"/"+tc.route, func(t *testing.T) {
			t.Parallel()
			prog := firstProgram(t, tc.doc)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog.code), 0o644))
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			env := []string{}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOWORK=") && !strings.HasPrefix(kv, "GOFLAGS=") {
					env = append(env, kv)
				}
			}
			if tc.route == "replace" {
				env = append(env, "GOWORK=off")
			}
			run := func(args ...string) string {
				cmd := exec.CommandContext(ctx, gobin, args...)
				cmd.Dir = dir
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%s: go %s:\n%s", prog, strings.Join(args, " "), out)
				return string(out)
			}
			run("mod", "init", "example.com/game")
			switch tc.route {
			case "replace":
				require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
				run("mod", "edit", "-require="+mod+"@v0.0.0", "-replace="+mod+"="+clone)
				run("mod", "tidy")
			case "go.work":
				run("work", "init", ".", clone)
			}
			out := run("run", ".")
			assert.Regexp(t, `^127\.0\.0\.1:\d+ echoed "jump"\n$`, out, "%s printed something else", prog)
		})
	}
}

// TestReadmeTestCommandInCI: CI runs the test command the README gives,
// so that what a user runs is what CI checks.
func TestReadmeTestCommandInCI(t *testing.T) {
	const cmd = "go run ./internal/testing/gotest"
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	ci, err := os.ReadFile(".ci/run")
	require.NoError(t, err)
	assert.Contains(t, string(readme), cmd+" ./...", "README.md's test command")
	assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(cmd)+" .*\\./\\.\\.\\.$", string(ci), ".ci/run does not run the README's test command")
}

// TestEnvironmentDocumented: every NETCODE_ variable a test or a tool of
// the module reads (os.Getenv("NETCODE_...")) is named in the docs, so
// that none is found only by reading the code.
func TestEnvironmentDocumented(t *testing.T) {
	getenv := regexp.MustCompile(`Getenv\("(NETCODE_[A-Z0-9_]+)"\)`)
	var docs strings.Builder
	for _, name := range readmes(t) {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		docs.Write(b)
	}
	vars := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range getenv.FindAllStringSubmatch(string(b), -1) {
			vars[m[1]] = path
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, vars)
	for v, path := range vars {
		named := regexp.MustCompile(`\b` + v + `\b`).MatchString(docs.String())
		assert.True(t, named, "%s, read by %s, is in no page of docs/ or README.md", v, path)
	}
}
