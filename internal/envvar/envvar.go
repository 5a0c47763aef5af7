// Package envvar edits environments as the os package gives them: slices
// of NAME=value strings, where a later entry wins over an earlier one.
package envvar

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Merge returns base with the overrides applied in order; later wins. Keys
// of one map are applied in sorted order, so the result is deterministic.
func Merge(base []string, overrides ...map[string]string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+8)
	put := func(k, kv string) {
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		put(k, kv)
	}
	for _, m := range overrides {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			put(k, k+"="+m[k])
		}
	}
	return out
}

// Set returns env with each name=value pair set, replacing any earlier
// value; pairs alternate names and values.
func Set(env []string, pairs ...string) []string {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("envvar.Set: odd pairs %v", pairs))
	}
	m := map[string]bool{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = true
	}
	out := make([]string, 0, len(env)+len(pairs)/2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !m[k] {
			out = append(out, kv)
		}
	}
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, pairs[i]+"="+pairs[i+1])
	}
	return out
}

// Get returns the value of name in env, the last one when it is set twice.
func Get(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// Unset returns env without name.
func Unset(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}
