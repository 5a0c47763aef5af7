package envvar

import (
	"slices"
	"testing"
)

func TestMergeSetGetUnset(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"merge keeps order and later wins", Merge([]string{"A=1", "B=2", "A=3"}, map[string]string{"C": "4", "B": "5"}), []string{"A=3", "B=5", "C=4"}},
		{"merge maps in sorted order", Merge(nil, map[string]string{"Z": "1", "Y": "2"}), []string{"Y=2", "Z=1"}},
		{"set replaces and appends", Set([]string{"A=1", "B=2"}, "A", "9", "D", "x=y"), []string{"B=2", "A=9", "D=x=y"}},
		{"unset removes every copy", Unset([]string{"A=1", "B=2", "A=3"}, "A"), []string{"B=2"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if v := Get([]string{"A=1", "A=2=3"}, "A"); v != "2=3" {
		t.Errorf("Get = %q, want the last value", v)
	}
	if v := Get([]string{"AB=1"}, "A"); v != "" {
		t.Errorf("Get matched a prefix: %q", v)
	}
}
