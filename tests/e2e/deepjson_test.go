package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/tests/proc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// deepImport is an Import whose data nests deeply: the whole document
// (as an attacker sends it) or a value inside a genuine export.
func deepImport(export string, i int) *sessionv1.ImportSessionRequest {
	deep := strings.Repeat("[", 100<<10) + strings.Repeat("]", 100<<10) // 200 KiB
	if i%2 == 0 {
		return &sessionv1.ImportSessionRequest{Data: deep}
	}
	return &sessionv1.ImportSessionRequest{Data: strings.Replace(export, `"linked_plans":[`, `"linked_plans":[`+deep+",", 1)}
}

// wantDepthRefused fails unless err is INVALID_ARGUMENT naming the
// nesting limit.
func wantDepthRefused(t *testing.T, err error) {
	t.Helper()
	if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "limit of 128 levels") {
		t.Errorf("deeply nested Import: %v; want INVALID_ARGUMENT naming the limit of 128 levels", err)
	}
}

// Issue 26: four concurrent Imports of 200 KiB nesting 100,000 levels
// deep used to take a node limited to 1 GiB out (each ran for minutes and
// took gigabytes: the strict check built a path string per level). Now
// each is refused at once, the node's peak resident memory barely moves,
// an honest client is served, and SIGTERM stops the node promptly while
// such requests keep coming. The CLI refuses such a file too.
func TestDeepJSONImportIsRefusedCheaply(t *testing.T) {
	binaries(t)
	// Without the race detector, whose shadow memory would be what is
	// measured; under a soft memory limit, as a container would set one.
	n := startNodeExec(t, cliBin, []string{"GOMEMLIMIT=256MiB"}, t.TempDir())
	client := sessionv1.NewSessionServiceClient(n.conn())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cr, err := client.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "honest", MetadataJson: `{"a":{"b":[1]}}`})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	honest := func() {
		t.Helper()
		if _, err := client.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "still here?"}}}); err != nil {
			t.Fatalf("an honest Append: %v", err)
		}
		ex, err := client.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: sid})
		if err != nil {
			t.Fatalf("an honest Export: %v", err)
		}
		if _, err := client.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()}); err != nil {
			t.Fatalf("an honest Import: %v", err)
		}
	}
	honest() // the import path warmed up before the baseline
	ex, err := client.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatal(err)
	}
	pid := n.cmd.Process.Pid
	before, err := proc.Status(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, err := client.Import(ctx, deepImport(ex.GetData(), i))
			wantDepthRefused(t, err)
		})
	}
	wg.Wait()
	after, err := proc.Status(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node VmHWM: %.1f MiB before the four deep Imports, %.1f MiB after", float64(before)/(1<<20), float64(after)/(1<<20))
	if after-before >= 50<<20 {
		t.Errorf("four deep Imports grew the node's peak resident memory by %d MiB; want under 50", (after-before)>>20)
	}
	honest()

	// The CLI: a single document goes to the node as one Import; an
	// export file is read (strictly) by the CLI itself.
	dir := t.TempDir()
	single, lines := filepath.Join(dir, "deep.json"), filepath.Join(dir, "deep.jsonl")
	writeFile(t, single, strings.Repeat("[", 20<<10)+strings.Repeat("]", 20<<10))
	writeFile(t, lines, `{"format":"jsonl","session":`+strings.Repeat(`{"a":`, 8<<10)+"\n")
	for _, f := range []string{single, lines} {
		r := n.cli(nil, "session", "import", "--file", f)
		r.fails(t, exitInvalidArgument, "INVALID_ARGUMENT")
		if !strings.Contains(r.stderr, "limit of 128 levels") {
			t.Errorf("import --file %s: %s; want the limit named", filepath.Base(f), r.stderr)
		}
	}

	// SIGTERM while deep Imports keep coming: the node drains and exits
	// well within its 30 s shutdown phases (it used to wait for the
	// requests, minutes each).
	refused := make(chan struct{}, 64)
	for i := range 4 {
		wg.Go(func() {
			for {
				_, err := client.Import(ctx, deepImport(ex.GetData(), i))
				if status.Code(err) != codes.InvalidArgument {
					return // the node stopped serving
				}
				wantDepthRefused(t, err)
				select {
				case refused <- struct{}{}:
				default:
				}
			}
		})
	}
	for range 8 {
		select {
		case <-refused:
		case <-ctx.Done():
			t.Fatal("the deep Imports before SIGTERM were not answered")
		}
	}
	if code := n.terminate(20 * time.Second); code != 0 {
		t.Errorf("node exited %d after SIGTERM; want 0", code)
	}
	wg.Wait()
}
