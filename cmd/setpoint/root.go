package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:           "setpoint",
		Short:         "Declarative reconciler for run-time capacity",
		Long:          "setpoint reads NFR specs from a directory, decides replicas and memory from live signals, and plans and applies the changes safely.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return err
			}
			slog.SetDefault(slog.New(newDedupe(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}), time.Minute)))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", envOr("SETPOINT_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	addTrustFlags(root)
	root.AddCommand(newInitCmd(), newValidateCmd(), newPlanCmd(), newApplyCmd(), newWatchCmd(), newSimCmd(), newQueryCmd(), newProviderCmd(), newProvidersCmd(), newStateCmd(), newVersionCmd(), newAgentCmd())
	root.AddCommand(newInternalCmd())
	// cobra's completion command prints its help, and exits 0, for a shell
	// it does not know; a script piping it into a file would not notice.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("unknown shell %q: setpoint completes bash, zsh, fish and powershell", args[0])
				}
				return cmd.Help()
			}
		}
	}
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
