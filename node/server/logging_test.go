package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestLibraryLogLevels: Proto.Actor's records reach the node's handler
// (its format, tagged component=protoactor) at the levels they deserve: a
// peer that does not answer is a WARN (once a minute per peer, the polls in
// between DEBUG), the provider's server closing at shutdown is INFO, and a
// real error stays an ERROR.
func TestLibraryLogLevels(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	lib := libraryLogger(log)
	peer := slog.String("autoManMemberUrl", "http://127.0.0.1:1/_health")
	lib.Error("Bad connection to the node health status", slog.Any("error", errors.New("refused")), peer)
	lib.Error("Bad connection to the node health status", slog.Any("error", errors.New("refused")), peer)
	lib.Error("Bad connection to the node health status", slog.Any("error", errors.New("refused")),
		slog.String("autoManMemberUrl", "http://127.0.0.1:2/_health"))
	lib.Error("EndpointWriter lost connection", slog.String("address", "127.0.0.1:3"), slog.Any("error", errors.New("EOF")))
	lib.Error("Automanaged server stopping..!", slog.Any("error", http.ErrServerClosed))
	lib.Error("Automanaged server stopping..!", slog.Any("error", errors.New("listen tcp :1: address already in use")))
	lib.Error("Failed to poison actor")
	lib.Info("Started EndpointManager")

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line of the node's handler: %q", line)
		}
		if rec["component"] != "protoactor" {
			t.Errorf("record %q lacks component=protoactor", line)
		}
		got = append(got, rec["level"].(string)+" "+rec["msg"].(string))
	}
	want := []string{
		"WARN Bad connection to the node health status",
		"DEBUG Bad connection to the node health status", // the same peer again, within the minute
		"WARN Bad connection to the node health status",  // another peer
		"WARN EndpointWriter lost connection",
		"INFO Automanaged server stopping..!",
		"ERROR Automanaged server stopping..!",
		"ERROR Failed to poison actor",
		"INFO Started EndpointManager",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// At the node's INFO the library's INFO chatter and the re-levelled
	// shutdown line stay out; warnings and errors come through.
	buf.Reset()
	log, _ = NewLogger(&buf, "text", "info")
	lib = libraryLogger(log)
	lib.Info("Started EndpointManager")
	lib.Error("Automanaged server stopping..!", slog.Any("error", http.ErrServerClosed))
	lib.Error("Failure reaching nodes", slog.Any("error", errors.New("refused")))
	if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN msg=\"Failure reaching nodes\"") {
		t.Fatalf("at info the library logged:\n%s", out)
	}
}
