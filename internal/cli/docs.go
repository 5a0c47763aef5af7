package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/chaos-harness/chaos/internal/buildinfo"
)

func init() { extraCommands = append(extraCommands, newDocsCmd) }

func newDocsCmd(s *streams) *cobra.Command {
	var man, markdown string
	cmd := &cobra.Command{
		Use:   "docs --man DIR | --markdown DIR",
		Short: "Write the reference of every command as man pages or Markdown",
		Long: `Write the reference of every command, generated from the commands' own help:
with --man, one man page per command (chaos.1, chaos-run.1, ...) into DIR,
for man(1) (man -l DIR/chaos-run.1, or install them under a MANPATH
directory's man1/); with --markdown, one Markdown page per command. The
directory is made when needed. scripts/release.sh writes the man pages of a
release.

Exit codes: 0 written; 4 neither --man nor --markdown; 2 a page could not be
written.`,
		Example: `  chaos docs --man /usr/local/share/man/man1 && man chaos-run
  chaos docs --man dist/man && man -l dist/man/chaos-evaluate.1
  chaos docs --markdown docs/reference`,
		Args: noArgs("give the directory with --man DIR or --markdown DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if man == "" && markdown == "" {
				return withHint(invalidf("docs needs --man DIR or --markdown DIR"), "usage: "+cmd.UseLine())
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			if man != "" {
				if err := os.MkdirAll(man, 0o755); err != nil {
					return harnessf("making %s: %v", man, err)
				}
				// The date is the build's, not today's, so the pages of one
				// version are the same whenever they are written.
				date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
					var sec int64
					if _, err := fmt.Sscan(v, &sec); err == nil {
						date = time.Unix(sec, 0).UTC()
					}
				}
				header := &doc.GenManHeader{Title: "CHAOS", Section: "1", Source: "chaos " + buildinfo.String(), Manual: "chaos manual", Date: &date}
				if err := doc.GenManTree(root, header, man); err != nil {
					return harnessf("writing man pages to %s: %v", man, err)
				}
				fmt.Fprintf(s.out, "man pages written to %s\n", abs(man))
			}
			if markdown != "" {
				if err := os.MkdirAll(markdown, 0o755); err != nil {
					return harnessf("making %s: %v", markdown, err)
				}
				if err := doc.GenMarkdownTree(root, markdown); err != nil {
					return harnessf("writing Markdown pages to %s: %v", markdown, err)
				}
				fmt.Fprintf(s.out, "Markdown pages written to %s\n", abs(markdown))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&man, "man", "", "write man pages (section 1) into this directory")
	cmd.Flags().StringVar(&markdown, "markdown", "", "write Markdown pages into this directory")
	_ = cmd.MarkFlagDirname("man")
	_ = cmd.MarkFlagDirname("markdown")
	return cmd
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
