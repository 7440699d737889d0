package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/providers/ebpf"
)

// newProviderCleanupCmd removes what a crashed eBPF agent left pinned:
// the only way a pinned dataplane is detached besides the agent's own
// clean exit.
func newProviderCleanupCmd() *cobra.Command {
	var pinDir string
	var groups, slots int
	cmd := &cobra.Command{
		Use:   "cleanup ebpf --pin-dir DIR",
		Short: "Detach the eBPF dataplane a crashed agent left pinned, and remove its pins",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != ebpf.Name {
				return fmt.Errorf("only the ebpf provider leaves state behind, not %q", args[0])
			}
			if pinDir == "" {
				return fmt.Errorf("--pin-dir is required: the agent's pinDir")
			}
			if err := ebpf.Cleanup(pinDir, groups, slots); err != nil {
				return fmt.Errorf("cleaning up %s: %w", pinDir, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "detached the dataplane pinned at %s\n", pinDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&pinDir, "pin-dir", "", "the agent's pinDir (in a bpffs)")
	cmd.Flags().IntVar(&groups, "groups", ebpf.DefaultGroups, "the agent's groups")
	cmd.Flags().IntVar(&slots, "slots", ebpf.DefaultSlots, "the agent's slots")
	return cmd
}
