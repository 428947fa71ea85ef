package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestEnvironmentSetsFlagsAndCommandLineWins(t *testing.T) {
	t.Setenv("AGENTSTATE_GRPC_ADDR", "127.0.0.1:1")
	t.Setenv("AGENTSTATE_MAX_RECV_BYTES", "1234")
	root := newRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.ParseFlags([]string{"--max-recv-bytes", "99"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(serve); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return serve.Flags().Lookup(name).Value.String() }
	if got := get("grpc-addr"); got != "127.0.0.1:1" {
		t.Errorf("grpc-addr = %q, want the environment's", got)
	}
	if got := get("max-recv-bytes"); got != "99" {
		t.Errorf("max-recv-bytes = %q, want the command line's", got)
	}
	if got := get("http-addr"); got != "127.0.0.1:7421" {
		t.Errorf("http-addr = %q, want the default", got)
	}
}

func TestBadEnvironmentValueIsAUsageError(t *testing.T) {
	t.Setenv("AGENTSTATE_MAX_RECV_BYTES", "lots")
	var stderr bytes.Buffer
	code := run([]string{"serve"}, &bytes.Buffer{}, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "AGENTSTATE_MAX_RECV_BYTES") {
		t.Fatalf("exit %d, stderr %q; want %d naming the variable", code, stderr.String(), exitUsage)
	}
}

// TestPerRequestFlagsIgnoreTheEnvironment: a variable exported for one
// command must not filter or fill another's request; connection settings
// still come from the environment.
func TestPerRequestFlagsIgnoreTheEnvironment(t *testing.T) {
	t.Setenv("AGENTSTATE_ACTOR", "alice")
	t.Setenv("AGENTSTATE_TYPE", "session_deleted")
	t.Setenv("AGENTSTATE_CONTENT", "surprise")
	t.Setenv("AGENTSTATE_ADDR", "127.0.0.1:1")
	t.Setenv("AGENTSTATE_TIMEOUT", "3s")
	root := newRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	for _, path := range [][]string{{"audit", "count"}, {"session", "append"}, {"session", "list"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(cmd); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"actor", "type", "content"} {
			if f := cmd.Flags().Lookup(name); f != nil && (f.Changed || f.Value.String() != "") {
				t.Errorf("%v --%s = %q (changed %v); want it untouched by %s", path, name, f.Value, f.Changed, envName(name))
			}
		}
		if got := cmd.Flags().Lookup("addr").Value.String(); got != "127.0.0.1:1" {
			t.Errorf("%v --addr = %q, want AGENTSTATE_ADDR's", path, got)
		}
		if got := cmd.Flags().Lookup("timeout").Value.String(); got != "3s" {
			t.Errorf("%v --timeout = %q, want AGENTSTATE_TIMEOUT's", path, got)
		}
	}
}

// TestHelpDocumentsEveryFlag: each flag of each command says what it does,
// and names its environment variable exactly when the environment can set
// it: connection and server settings, never a per-request field.
func TestHelpDocumentsEveryFlag(t *testing.T) {
	connection := map[string]bool{"addr": true, "token-file": true, "tls": true, "tls-ca": true,
		"tls-server-name": true, "insecure": true, "timeout": true, "tls-client-cert": true, "tls-client-key": true}
	root := newRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	n := 0
	walk(root, func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			n++
			if len(f.Usage) < 7 {
				t.Errorf("%s --%s: usage %q lacks a description", c.CommandPath(), f.Name, f.Usage)
			}
			group := ""
			if words := strings.Fields(c.CommandPath()); len(words) > 1 {
				group = words[1]
			}
			client := group == "session" || group == "plan" || group == "audit"
			wantEnv := group == "serve" || (client && connection[f.Name])
			if hasEnv := strings.Contains(f.Usage, "(env "+envName(f.Name)+")"); hasEnv != wantEnv || settableFromEnv(f) != wantEnv {
				t.Errorf("%s --%s: usage %q, settable from the environment %v; want %v",
					c.CommandPath(), f.Name, f.Usage, settableFromEnv(f), wantEnv)
			}
		})
	})
	if n < 40 {
		t.Fatalf("only %d flags seen; the walk missed commands", n)
	}
	var out bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "AGENTSTATE_GRPC_ADDR") {
		t.Fatalf("serve --help: exit %d, output lacks AGENTSTATE_GRPC_ADDR:\n%s", code, out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"session", "get"},                                        // missing --session
		{"session", "get", "--bogus"},                             // unknown flag
		{"session", "get", "--session", "X", "extra"},             // positional argument
		{"session", "append", "--session", "X"},                   // no messages
		{"session", "append", "--session", "X", "--role", "user"}, // no --content
		{"session", "append", "--session", "X", "--role", "wizard", "--content", "c"},
		{"session", "delete", "--session", "X"}, // no --yes
		{"plan", "record-error", "--plan", "P", "--phase", "nope", "--type", "T"},
		{"nonsense"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &bytes.Buffer{}, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want %d", args, code, stderr.String(), exitUsage)
		}
	}
}

// node version prints the binary's build information as one JSON object.
func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v buildVersion
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	want, err := readVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v != want || v.GoVersion != runtime.Version() || v.Version == "" || v.Module != "github.com/agentstate/agentstate" {
		t.Fatalf("printed %+v; the build information says %+v (Go %s)", v, want, runtime.Version())
	}
}
