package main

import (
	"log/slog"
	"os"

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
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl})))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", envOr("SETPOINT_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	addTrustFlags(root)
	root.AddCommand(newValidateCmd(), newPlanCmd(), newApplyCmd(), newWatchCmd(), newSimCmd(), newQueryCmd(), newProviderCmd(), newProvidersCmd(), newStateCmd(), newVersionCmd())
	root.AddCommand(newInternalCmd())
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
