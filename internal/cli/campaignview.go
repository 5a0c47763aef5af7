package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/campaign"
)

// withCampaignShare lets chaos share take campaigns: chaos share CAMPAIGN
// [CAMPAIGN] writes the campaigns' Markdown table instead of a run's page.
func withCampaignShare(s *streams, cmd *cobra.Command) *cobra.Command {
	var unit string
	var perRun int
	cmd.Flags().StringVar(&unit, "unit", "chances", "campaigns: what a chance is called in the table (e.g. starts)")
	cmd.Flags().IntVar(&perRun, "per-run", 12, "campaigns: list each run of a campaign of at most N runs on a row of its own")
	cmd.Use = "share RUN|CAMPAIGN [CAMPAIGN] [--max-instances N] [-o FILE]"
	cmd.Long += `

Given a campaign directory (or two), it writes the campaigns instead: each
with its verdicts and hit rate, and a table of chances and hits of the check
they are about, a row per run for small campaigns; for two campaigns the
comparison sentence (Fisher's exact test), for one how many chances a second
campaign needs to show a fix.`
	single := cmd.RunE
	cmd.Args = cobra.RangeArgs(1, 2)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if !campaign.IsDir(args[0]) {
			if len(args) != 1 {
				return inputError(fmt.Sprintf("share takes one run directory, or one or two campaigns; %s is not a campaign directory", args[0]))
			}
			return single(c, args)
		}
		var files []*campaign.File
		for _, a := range args {
			f, err := campaign.Read(a)
			if err != nil {
				return inputError(err.Error())
			}
			files = append(files, f)
		}
		out, _ := c.Flags().GetString("output")
		return viewWrite(s, out, campaign.Markdown(files, campaign.ShareOptions{Unit: unit, PerRun: perRun}), "share page")
	}
	return cmd
}

// withCampaignReport lets chaos report take a campaign: it writes
// CAMPAIGN/campaign.html again.
func withCampaignReport(s *streams, cmd *cobra.Command) *cobra.Command {
	single := cmd.RunE
	cmd.Use = "report RUN|CAMPAIGN"
	cmd.Long += `

Given a campaign directory, it writes CAMPAIGN/campaign.html again from
campaign.json.`
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if !campaign.IsDir(args[0]) {
			return single(c, args)
		}
		f, err := campaign.Read(args[0])
		if err != nil {
			return inputError(err.Error())
		}
		if err := campaign.WritePage(args[0], f); err != nil {
			return withCode(ExitError, fmt.Sprintf("writing the page of campaign %s: %v", args[0], err))
		}
		path := filepath.Join(args[0], campaign.PageName)
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		fmt.Fprintln(s.out, path)
		return nil
	}
	return cmd
}
