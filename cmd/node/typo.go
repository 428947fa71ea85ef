package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// unknownSubcommand reports a mistyped subcommand below the root (node
// session apend --session X) as "unknown command" with cobra's
// suggestions. cobra checks subcommand names only at the root: below it,
// the group (session) parses the flags meant for the subcommand and
// answers "unknown flag: --session", or prints its help. The root's own
// typos are left to cobra, which reports them the same way.
func unknownSubcommand(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root || !cmd.HasAvailableSubCommands() {
		return nil
	}
	name := firstPositional(cmd, rest)
	if name == "" {
		return nil
	}
	// Find descended through every valid name, so name is none of cmd's.
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the command it executes
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("%s", msg)}
}

// firstPositional is the first argument of args that is not a flag or a
// flag's value, "" when there is none. A flag cmd does not know (one meant
// for the subcommand) is taken to have a value unless the next argument
// is a flag: most flags of this CLI take one.
func firstPositional(cmd *cobra.Command, args []string) string {
	cmd.InheritedFlags() // merges the parents' persistent flags into Flags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case len(a) < 2 || a[0] != '-':
			return a
		case strings.Contains(a, "="):
			continue
		}
		name := strings.TrimLeft(a, "-")
		f := cmd.Flags().Lookup(name)
		if f == nil && len(name) == 1 {
			f = cmd.Flags().ShorthandLookup(name)
		}
		takesValue := f == nil || f.NoOptDefVal == ""
		if f == nil && (i+1 >= len(args) || strings.HasPrefix(args[i+1], "-")) {
			takesValue = false
		}
		if takesValue {
			i++
		}
	}
	return ""
}
