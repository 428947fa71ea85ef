package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix prefixes the environment equivalent of a flag.
const envPrefix = "AGENTSTATE_"

// envAnnotation marks the flags that the environment may set: connection
// and server settings only. A per-request field (an id, an actor, a type, a
// filter, content) never reads a variable: one exported for one command
// would silently change what every later command asks for.
const envAnnotation = "agentstate/env"

// run executes the command line args and returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := unknownSubcommand(root, args)
	if err == nil {
		err = root.Execute()
	}
	if err == nil {
		return 0
	}
	var ue *usageError
	if !errors.As(err, &ue) && strings.HasPrefix(err.Error(), "unknown command") {
		ue = &usageError{cmd: "node", err: err}
	}
	if ue != nil {
		fmt.Fprintf(stderr, "Error: %v\nRun '%s --help' for usage.\n", ue.err, ue.cmd)
		return exitUsage
	}
	writeError(stderr, err)
	return exitCode(err)
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "node",
		Short: "agentstate node: serve the actors, or talk to a running node",
		Long: "node runs agentstate as a service (node serve) and is its command-line client.\n\n" +
			"Connection and server settings (the node's address, token file, TLS files, serve's\n" +
			"flags) can also be set through the environment: AGENTSTATE_<FLAG>, upper case, dashes as\n" +
			"underscores (--grpc-addr: AGENTSTATE_GRPC_ADDR); --help names the variable of each one.\n" +
			"Per-request flags (ids, actor, type, content, filters) are command line only. The command\n" +
			"line wins.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{cmd: cmd.CommandPath(), err: err}
	})
	root.AddCommand(newServeCommand())
	root.AddCommand(newSessionCommand())
	root.AddCommand(newPlanCommand())
	root.AddCommand(newAuditCommand())
	root.AddCommand(benchCommand())
	root.AddCommand(newVersionCommand())
	// Document the environment equivalent of each settable flag in --help.
	walk(root, func(c *cobra.Command) {
		annotateEnv(c.LocalNonPersistentFlags())
		annotateEnv(c.PersistentFlags())
		if c.Args == nil && c.HasParent() {
			c.Args = noArgs
		}
	})
	return root
}

// usageError is a bad command line (unknown flag, bad value, missing
// argument): it exits with exitUsage.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf(format, args...)}
}

// noArgs rejects positional arguments: every input is a named flag.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "unexpected argument %q (every input is a --flag)", args[0])
	}
	return nil
}

// requireFlags fails with a usage error when one of names was not given
// (on the command line, or through the environment for a flag fromEnv
// allowed).
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f == nil || !f.Changed {
			return usagef(cmd, "--%s is required", n)
		}
	}
	return nil
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// envName is the environment variable that sets flag name.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv lets the environment set the named flags of fs. It is called
// where the flags are declared, so the allow-list sits next to them.
func fromEnv(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, envAnnotation, []string{"true"}); err != nil {
			panic(err) // a name not declared: a programming error
		}
	}
}

// settableFromEnv says whether fromEnv allowed f.
func settableFromEnv(f *pflag.Flag) bool {
	_, ok := f.Annotations[envAnnotation]
	return ok
}

func annotateEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if !settableFromEnv(f) || strings.Contains(f.Usage, "(env ") {
			return
		}
		f.Usage += " (env " + envName(f.Name) + ")"
	})
}

// applyEnv sets every flag of cmd that fromEnv allowed and that was not
// given on the command line from its environment variable, when that is
// set. Because it runs before
// the command, the values the command sees already include the
// environment; the command line wins because Changed flags are skipped.
func applyEnv(cmd *cobra.Command) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || !settableFromEnv(f) || firstErr != nil {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			firstErr = &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("%s=%q: %v", envName(f.Name), v, err)}
			return
		}
		f.Changed = true
	})
	return firstErr
}
