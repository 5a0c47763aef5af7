package rundir

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/run-directory.md's tables of events list exactly the events and
// fields of Events, the list validation checks event checks against.
func TestEventsMatchTheDocs(t *testing.T) {
	data, err := os.ReadFile("../../docs/run-directory.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start, end := strings.Index(doc, "### Events"), strings.Index(doc, "### Order of a run")
	if start < 0 || end < start {
		t.Fatal("docs/run-directory.md has no Events section")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z.-]+)` \\| (.*?) \\| ")
	field := regexp.MustCompile("`([a-z_]+)`")
	documented := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(doc[start:end], -1) {
		// Fields are the names in backticks outside parentheses.
		cols := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(m[2], "")
		for _, f := range field.FindAllStringSubmatch(cols, -1) {
			if !slices.Contains(documented[m[1]], f[1]) {
				documented[m[1]] = append(documented[m[1]], f[1])
			}
		}
		if _, ok := documented[m[1]]; !ok {
			documented[m[1]] = nil
		}
	}
	for _, e := range Events {
		if e.Name == "run.na" {
			// Read by evaluate, never written by the engine: the docs say
			// so in a sentence of their own.
			if !strings.Contains(doc, "`run.na`") {
				t.Error("the docs do not mention run.na")
			}
			continue
		}
		fields, ok := documented[e.Name]
		if !ok {
			t.Errorf("event %s is not in the docs' tables", e.Name)
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(fields)), slices.Sorted(slices.Values(e.Fields))) {
			t.Errorf("event %s: the docs list the fields %v, Events %v", e.Name, fields, e.Fields)
		}
		delete(documented, e.Name)
	}
	for name := range documented {
		t.Errorf("the docs list event %s, which Events lacks", name)
	}
}
