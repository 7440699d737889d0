package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newDocsCmd writes the CLI reference (docs/cli), one Markdown page per
// command, from the commands themselves: make docs runs it, and a test
// checks the committed pages are current.
func newDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cli-docs DIR",
		Short: "Write the CLI reference, one Markdown page per command, into DIR",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return writeCLIDocs(args[0])
		},
	}
}

func writeCLIDocs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := newRootCmd()
	// No generation date: the pages change only when the commands do.
	root.DisableAutoGenTag = true
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("writing the CLI reference: %w", err)
	}
	return nil
}
