package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/internal/confine"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

// newProviderCmd is how setpoint re-executes itself to serve a built-in
// provider out of process.
func newProviderCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Built-in providers (setpoint starts these itself)", Hidden: true}
	cmd.AddCommand(&cobra.Command{
		Use:   "serve NAME",
		Short: "Serve a built-in provider over the plugin protocol",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			mk, ok := builtIn[args[0]]
			if !ok {
				return fmt.Errorf("no built-in provider %q (built in: %s)", args[0], strings.Join(builtInNames(), ", "))
			}
			p := mk()
			sdk.Serve(p)
			// A clean stop: an agent that holds kernel state (the eBPF
			// dataplane) detaches it. A crash never gets here.
			if s, ok := p.(interface{ Shutdown() error }); ok {
				return s.Shutdown()
			}
			return nil
		},
	})
	cmd.AddCommand(newProviderCleanupCmd())
	return cmd
}

func newProvidersCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "providers [--dir DIR]",
		Short: "List the providers found, their versions and schemas",
		Long: `providers lists the built-in providers and every setpoint-provider-NAME on the
plugin path of the directory's Environment, starts each once to ask for its
version and schema, and stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := selfBinary()
			if err != nil {
				return err
			}
			m := &plugin.Manager{Self: self, BuiltIn: builtInNames(), Pins: map[string]string{}}
			defer m.Close()
			if dir != "" {
				l, err := newLoader(cmd.Context(), defaultCUELimits())
				if err != nil {
					return err
				}
				if env := l.LoadDir(dir).Environment(); env != nil {
					root, err := confine.NewRoot(dir)
					if err != nil {
						return fmt.Errorf("%s: %w", dir, err)
					}
					paths, _ := resolveEnvPaths(root, env, trust)
					m.PluginPath, m.Refused = paths.plugins, paths.refused
					for _, p := range paths.refused {
						slog.Warn("pluginPath entry inside the spec directory is not searched; pass --allow-spec-plugins to trust it", "entry", p)
					}
					for _, p := range env.Spec.Providers {
						if p.SHA256 != "" {
							m.Pins[p.Name] = p.SHA256
						}
					}
				}
			}
			type row struct {
				Name    string           `json:"name"`
				Path    string           `json:"path"`
				BuiltIn bool             `json:"builtIn"`
				Schema  providers.Schema `json:"schema"`
				Error   string           `json:"error,omitempty"`
			}
			var rows []row
			for _, f := range m.List() {
				r := row{Name: f.Name, Path: f.Path, BuiltIn: f.BuiltIn}
				sc, diags := m.Provider(f.Name, nil).Schema(context.Background())
				r.Schema = sc
				for _, d := range diags {
					r.Error = d.Error()
				}
				rows = append(rows, r)
			}
			if asJSON {
				enc := jsonOut(cmd.OutOrStdout())
				return enc.Encode(rows)
			}
			out := cmd.OutOrStdout()
			for _, r := range rows {
				where := r.Path
				if r.BuiltIn {
					where = "built in"
				}
				if r.Error != "" {
					fmt.Fprintf(out, "%s (%s): %s\n", r.Name, where, r.Error)
					continue
				}
				fmt.Fprintf(out, "%s %s (%s; signals %t, events %t)\n", r.Name, r.Schema.Version, where, r.Schema.Signals, r.Schema.Events)
				sort.Slice(r.Schema.Kinds, func(i, j int) bool { return r.Schema.Kinds[i].Kind < r.Schema.Kinds[j].Kind })
				for _, k := range r.Schema.Kinds {
					fmt.Fprintf(out, "  %s\n", k.Kind)
					for _, a := range k.Attributes {
						ro := ""
						if a.ReadOnly {
							ro = ", read-only"
						}
						fmt.Fprintf(out, "    %s (%s%s)\n", a.Path, a.Type, ro)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "also search this directory's Environment pluginPath")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
