package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docBlock returns the first fenced block of kind (```sh, ```go) after the
// heading in the markdown file doc.
func docBlock(t *testing.T, doc, heading, kind string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("%s has no %q", doc, heading)
	}
	rest := text[i:]
	start := strings.Index(rest, "```"+kind+"\n")
	if start < 0 {
		t.Fatalf("%s: no %s block after %q", doc, kind, heading)
	}
	rest = rest[start+len(kind)+4:]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("%s: unterminated %s block after %q", doc, kind, heading)
	}
	return rest[:end]
}

// TestGoModuleRecipe follows docs/CLIENTS.md ("Getting the Go module") in a
// throwaway module outside the tree: the clone is this checkout (a link at
// the documented ../agentstate), then exactly the documented commands, then
// a build of the FeedService example of the same file together with a use
// of the ADK backend. It fails if the documented replace lines do not make
// both modules resolve. Modules come from the module cache (or GOPROXY when
// it is reachable); go.sum starts from the repository's own sums.
func TestGoModuleRecipe(t *testing.T) {
	clients := filepath.Join("..", "..", "docs", "CLIENTS.md")
	recipe := docBlock(t, clients, "### Getting the Go module", "sh")
	example := docBlock(t, clients, "### Following a session or the audit trail", "go")

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "agentstate")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	var sums []byte
	for _, f := range []string{filepath.Join(root, "go.sum"), filepath.Join(root, "adapters", "adk", "go.sum")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	files := map[string]string{
		"go.mod":  "module example.com/app\n\ngo 1.26.0\n",
		"go.sum":  string(sums),
		"main.go": example,
		"adk.go": "package main\n\nimport \"github.com/agentstate/agentstate/adapters/adk\"\n\n" +
			"// The ADK backend resolves through the second replace line.\nvar _ = adk.ErrStaleSession\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(app, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var steps []string
	replaces := 0
	for _, line := range strings.Split(recipe, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "git clone "):
			continue // the clone is the link above
		case strings.HasPrefix(line, "go mod edit -replace "):
			replaces++
		}
		steps = append(steps, line)
	}
	if replaces != 2 {
		t.Fatalf("the recipe has %d replace lines, want 2 (agentstate and its ADK backend):\n%s", replaces, recipe)
	}
	steps = append(steps, "go build -o /dev/null .")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, step := range steps {
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", step)
		cmd.Dir = app
		// -mod=mod lets the build record what tidy would; the sums of
		// modules the repository's go.sum files lack are not checked
		// against the checksum database, which a machine offline cannot
		// reach.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
}
