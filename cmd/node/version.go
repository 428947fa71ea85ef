package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is what node version prints: the module version and, when
// the binary was built in a checkout with VCS stamping on, the commit.
type buildVersion struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// readVersion reads the running binary's build information.
func readVersion() (buildVersion, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return buildVersion{}, fmt.Errorf("this binary carries no build information")
	}
	v := buildVersion{Module: info.Main.Path, Version: info.Main.Version, GoVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v, nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version: module version, VCS revision and time, Go version",
		Long: "version prints one JSON object: the module's version (\"(devel)\" for a build from a checkout),\n" +
			"the commit it was built from with its time and whether the tree had changes (when go build\n" +
			"stamped them: a build in a git checkout without -buildvcs=false), and the Go version.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := readVersion()
			if err != nil {
				return err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
}
