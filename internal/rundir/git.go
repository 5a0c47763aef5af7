package rundir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LookupGit returns the commit of the Git work tree dir is in and whether
// it has uncommitted changes to tracked files, or nil outside a work tree
// (where git is not even started) or when git cannot say.
func LookupGit(dir string) *GitState {
	if !inGitTree(dir) {
		return nil
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return nil
	}
	g := &GitState{SHA: strings.TrimSpace(string(out))}
	st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	g.Dirty = err == nil && len(strings.TrimSpace(string(st))) > 0
	return g
}

// Short is the state as the ledger and campaigns write it: the commit's
// first 12 hex digits, with +dirty for uncommitted changes; "" for nil.
func (g *GitState) Short() string {
	if g == nil {
		return ""
	}
	s := g.SHA
	if len(s) > 12 {
		s = s[:12]
	}
	if g.Dirty {
		s += "+dirty"
	}
	return s
}

// inGitTree reports whether dir or one of its parents holds .git.
func inGitTree(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return true // let git decide
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}
