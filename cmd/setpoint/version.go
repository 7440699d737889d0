package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/internal/version"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the spec API version and the kinds this binary reads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := map[string]any{
				"version":    version.Version,
				"commit":     version.Commit(),
				"go":         runtime.Version(),
				"apiVersion": spec.APIVersion,
				"kinds":      spec.Kinds(),
			}
			if asJSON {
				enc := jsonOut(cmd.OutOrStdout())
				return enc.Encode(info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "setpoint %s (%s, %s)\napiVersion %s, kinds %v\n",
				info["version"], orDash(version.Commit()), runtime.Version(), spec.APIVersion, spec.Kinds())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
