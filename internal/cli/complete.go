package cli

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/experiment"
)

// Shell completion (chaos completion bash|zsh|fish|powershell): experiment
// ids, adapter ids, run directories, the values of --by, --output and
// --backend, and every flag. Completion never fails: what cannot be read
// completes nothing, and a word that looks like a path completes as files.

// looksLikePath is a word the shell should complete as a file name.
func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~")
}

// completeExperiments completes an experiment id from the experiments
// directory (--dir), or a manifest file.
func completeExperiments(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if looksLikePath(toComplete) {
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
	flag, _ := cmd.Flags().GetString("dir")
	dir, err := experimentsDir(flag)
	if err != nil {
		return nil, cobra.ShellCompDirectiveDefault
	}
	files, _, _ := findManifests(dir)
	var out []string
	for _, f := range files {
		x, ps := experiment.Load(f)
		if x == nil || ps.Err() != nil || !strings.HasPrefix(x.ID, toComplete) {
			continue
		}
		out = append(out, x.ID+"\t"+oneLineTitle(x.Title))
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeAdapters completes an adapter id (files in the adapter
// directories and the built-in ones), or an adapter file. The adapter
// directories are those of the experiment given (or of the experiments
// directory), as chaos run would search them.
func (s *streams) completeAdapters(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if looksLikePath(toComplete) {
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
	adaptersDir, _ := cmd.Flags().GetString("adapters-dir")
	beside := ""
	if len(args) > 0 && looksLikePath(args[0]) {
		beside = args[0]
	} else if cmd.Flags().Lookup("dir") != nil {
		flag, _ := cmd.Flags().GetString("dir")
		if dir, err := experimentsDir(flag); err == nil {
			beside = filepath.Join(dir, "experiment.yaml")
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range s.resolverFor(beside, adaptersDir).List() {
		if seen[a.ID] || !strings.HasPrefix(a.ID, toComplete) {
			continue
		}
		seen[a.ID] = true
		out = append(out, a.ID+"\t"+oneLineTitle(a.Title))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRunDirs completes run directories under the runs directory
// ($CHAOS_RUNS_DIR, else ./runs), newest first; a word that is not one of
// them completes as a directory.
func (s *streams) completeRunDirs(toComplete string) ([]string, cobra.ShellCompDirective) {
	root := s.runsDirDefault()
	var out []string
	for _, d := range runDirsIn(root) {
		if strings.HasPrefix(d, toComplete) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// runArgs completes every argument as a run directory.
func (s *streams) runArgs(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return s.completeRunDirs(toComplete)
}

// oneRunArg completes the one run directory a command takes.
func (s *streams) oneRunArg(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return s.completeRunDirs(toComplete)
}

// completeIssues completes the issues the experiments' expectations name.
func completeIssues(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	flag, _ := cmd.Flags().GetString("dir")
	dir, err := experimentsDir(flag)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	files, _, _ := findManifests(dir)
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		x, ps := experiment.Load(f)
		if x == nil || ps.Err() != nil {
			continue
		}
		for _, is := range x.Issues() {
			if !seen[is] && strings.HasPrefix(is, toComplete) {
				seen[is] = true
				out = append(out, is)
			}
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// oneLineTitle is a title fit for a completion's description.
func oneLineTitle(s string) string { return strings.Join(strings.Fields(s), " ") }

// completeDirFlags marks flags that take a directory, and those that take a
// manifest file.
func completeDirFlags(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if cmd.Flags().Lookup(n) != nil {
			_ = cmd.MarkFlagDirname(n)
		}
	}
}

// addCompletions wires completion into the command tree: arguments and
// flag values by the commands' names and flags.
func (s *streams) addCompletions(root *cobra.Command) {
	adapterFlag := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return s.completeAdapters(cmd, args, toComplete)
	}
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "run", "preflight", "show":
			cmd.ValidArgsFunction = completeExperiments
		case "validate":
			cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
			}
		case "evaluate", "report", "evidence", "share":
			cmd.ValidArgsFunction = s.oneRunArg
		case "export", "dashboard", "cleanup", "stats":
			cmd.ValidArgsFunction = s.runArgs
		case "provision", "deprovision":
			cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return s.completeAdapters(c, nil, toComplete)
			}
		case "list", "adapters", "version":
			cmd.ValidArgsFunction = cobra.NoFileCompletions
		}
		if cmd.Flags().Lookup("adapter") != nil {
			_ = cmd.RegisterFlagCompletionFunc("adapter", adapterFlag)
		}
		if cmd.Name() == "adapters" {
			_ = cmd.RegisterFlagCompletionFunc("show", adapterFlag)
		}
		if cmd.Name() == "stats" {
			_ = cmd.RegisterFlagCompletionFunc("by", cobra.FixedCompletions(statsKeys, cobra.ShellCompDirectiveNoFileComp))
		}
		if cmd.Name() == "list" {
			_ = cmd.RegisterFlagCompletionFunc("issue", completeIssues)
		}
		if cmd.Name() == "cleanup" {
			_ = cmd.RegisterFlagCompletionFunc("backend", cobra.FixedCompletions(cleaners(), cobra.ShellCompDirectiveNoFileComp))
		}
		if f := cmd.Flags().Lookup("experiment"); f != nil {
			_ = cmd.MarkFlagFilename("experiment", "yaml", "yml")
		}
		completeDirFlags(cmd, "dir", "adapters-dir", "runs-dir")
	}
}

// statsKeys are the values of chaos stats --by.
var statsKeys = []string{"all", "git", "adapter", "version", "harness", "experiment-sha"}

// documentCompletion gives cobra's completion command (made here, so it can
// be documented) the help every command has.
func documentCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = `Print the completion script for a shell: bash, zsh, fish or powershell.
It completes commands and flags, experiment ids (from experiments/ or
examples/, or --dir), adapter ids (--adapter, adapters --show, provision),
run directories (under $CHAOS_RUNS_DIR or ./runs, newest first), and the
values of --by, --output, --backend and --issue. Each shell's command says
how to load it (chaos completion bash --help).

Exit codes: 0.`
		c.Example = `  source <(chaos completion bash)                          # this shell
  chaos completion bash > /etc/bash_completion.d/chaos     # every bash
  chaos completion zsh > "${fpath[1]}/_chaos"
  chaos completion fish > ~/.config/fish/completions/chaos.fish`
		for _, sh := range c.Commands() {
			sh.Long = strings.TrimRight(sh.Long, "\n") + "\n\nExit codes: 0."
			sh.Example = "  chaos completion " + sh.Name() + " > chaos." + sh.Name()
		}
	}
}
