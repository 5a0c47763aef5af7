package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jsonKeys calls fn with every object key in v, with its path.
func jsonKeys(v any, path string, fn func(path, key string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			fn(path, k)
			jsonKeys(e, path+"."+k, fn)
		}
	case []any:
		for _, e := range x {
			jsonKeys(e, path+"[]", fn)
		}
	}
}

// TestCompareJSON: compare --json names its shape in schema, as every
// other JSON document does, with snake_case keys; a side without a chance
// has no difference and no p, written null (JSON has no NaN), and A alone
// prints the plans as chaos.plan/v1.
func TestCompareJSON(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failing := write("fail.yaml", exitFailing)
	erroring := write("error.yaml", exitError)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, r := range []struct {
		runs, file string
		code       int
	}{{a, failing, 1}, {a, failing, 1}, {b, erroring, 2}} {
		if code, out, errs := chaos(t, "run", "--runs-dir", r.runs, "--plain", r.file); code != r.code {
			t.Fatalf("run %s: exit %d\n%s\n%s", r.file, code, out, errs)
		}
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	decode := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := chaos(t, args...)
		if code != 0 {
			t.Fatalf("chaos %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("chaos %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		jsonKeys(doc, "", func(path, key string) {
			if !snake.MatchString(key) {
				t.Errorf("chaos %s: key %q at %q is not snake_case", strings.Join(args, " "), key, path)
			}
		})
		return doc
	}
	for _, args := range [][]string{{"compare", "--json", a, b}, {"compare", "-o", "json", a, b}} {
		doc := decode(args...)
		if doc["schema"] != schemaCompare {
			t.Fatalf("schema %v, want %s", doc["schema"], schemaCompare)
		}
		ga, _ := doc["a"].(map[string]any)
		gb, _ := doc["b"].(map[string]any)
		if ga["runs"] != 2.0 || ga["decided"] != 2.0 || gb["runs"] != 1.0 || gb["decided"] != 0.0 || doc["unit"] != "chances" {
			t.Fatalf("groups %v %v unit %v", ga, gb, doc["unit"])
		}
		rows, _ := doc["rows"].([]any)
		if len(rows) == 0 {
			t.Fatalf("no rows: %v", doc)
		}
		first, _ := rows[0].(map[string]any)
		for _, k := range []string{"diff", "diff_lo", "diff_hi", "p"} {
			if v, ok := first[k]; !ok || v != nil {
				t.Errorf("row %v: %s is %v, want null (B has no chance)", first, k, v)
			}
		}
		if first["kind"] != "runs" || first["sentence"] == "" {
			t.Errorf("first row %v", first)
		}
	}
	doc := decode("compare", "--json", a)
	if doc["schema"] != schemaPlan || doc["a"] != filepath.Clean(a) {
		t.Fatalf("plan %v", doc)
	}
	if plans, _ := doc["plans"].([]any); len(plans) == 0 {
		t.Fatalf("no plans: %v", doc)
	}
}
