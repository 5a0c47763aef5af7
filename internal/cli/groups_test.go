package cli

import (
	"strings"
	"testing"
)

// TestHelpGroupsCommands reads chaos --help as a newcomer does: every
// command that does the work sits under one of the four headings, in the
// headings' order, and only the tool's own commands (docs, schema, version,
// completion, help) are left to "Additional Commands".
func TestHelpGroupsCommands(t *testing.T) {
	code, out, _ := chaos(t, "--help")
	if code != 0 {
		t.Fatalf("chaos --help exited %d", code)
	}
	last := -1
	for _, g := range commandGroups {
		i := strings.Index(out, "\n"+g.Title+"\n")
		if i < 0 {
			t.Fatalf("chaos --help has no heading %q:\n%s", g.Title, out)
		}
		if i < last {
			t.Errorf("heading %q is out of order", g.Title)
		}
		last = i
	}
	ungrouped := map[string]bool{"docs": true, "schema": true, "version": true, "completion": true, "help": true}
	root := newRoot(&streams{st: &State{}})
	for _, c := range root.Commands() {
		if c.Hidden {
			continue
		}
		switch {
		case ungrouped[c.Name()] && c.GroupID != "":
			t.Errorf("%s is under %q; it belongs to Additional Commands", c.Name(), c.GroupID)
		case !ungrouped[c.Name()] && c.GroupID == "":
			t.Errorf("%s is under no heading: add it to commandGroup in root.go", c.Name())
		}
	}
	// Each group's commands are listed between its heading and the next.
	section := func(title string) string {
		s := out[strings.Index(out, title):]
		if j := strings.Index(s, "\n\n"); j >= 0 {
			s = s[:j]
		}
		return s
	}
	for _, tc := range []struct{ cmd, title string }{
		{"run", "Running experiments:"},
		{"evaluate", "Reading a run:"},
		{"stats", "Across runs:"},
		{"provision", "Systems and adapters:"},
	} {
		if !strings.Contains(section(tc.title), "\n  "+tc.cmd+" ") {
			t.Errorf("%s is not listed under %q:\n%s", tc.cmd, tc.title, section(tc.title))
		}
	}
}
