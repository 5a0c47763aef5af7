package engine

import (
	"fmt"
	"github.com/chaos-harness/chaos/internal/backend"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// writeWorkloadFiles writes workloads/<w>/run.sh and wrapper.sh.
func writeWorkloadFiles(d *rundir.Dir, workload, script string) (runSh, wrapper string, err error) {
	dir := d.WorkloadDir(workload)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	runSh, wrapper = filepath.Join(dir, "run.sh"), filepath.Join(dir, "wrapper.sh")
	if err := os.WriteFile(runSh, []byte(script), 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(wrapper, []byte(backend.WrapperScript), 0o755); err != nil {
		return "", "", err
	}
	return runSh, wrapper, nil
}

// secretWord matches the words of a variable name that mark its value as a
// secret. Names are split at _, - and . so AUTHOR is not AUTH.
var secretWord = regexp.MustCompile(`(?i)^(secrets?|tokens?|passwords?|passwd|pwd|passphrase|apikey|credentials?|creds|auth|cookies?|signature|pat|dsn)$`)

// secretSuffix catches glued names such as PGPASSWORD and GHTOKEN.
var secretSuffix = regexp.MustCompile(`(?i)(password|passwd|secret|token)s?$`)

// secretPair matches two-word markers such as API_KEY and PRIVATE_KEY.
var secretPair = regexp.MustCompile(`(?i)(^|[_.-])(api|access|secret|private|session|signing|encryption)[_.-]?keys?($|[_.-])`)

// IsSecret reports whether an environment variable's name looks like it
// holds a secret.
func IsSecret(name string) bool {
	if secretPair.MatchString(name) {
		return true
	}
	for _, w := range regexp.MustCompile(`[_.-]+`).Split(name, -1) {
		if secretWord.MatchString(w) || secretSuffix.MatchString(w) {
			return true
		}
	}
	return false
}

// redactedEnv renders env as sorted NAME=value lines with secret values
// replaced.
func redactedEnv(env []string) []byte {
	lines := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if IsSecret(k) && v != "" {
			v = "<redacted>"
		}
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// Redactor replaces the values of secret-looking variables in text.
type Redactor struct{ values []string }

// NewRedactor collects the secret values found in env.
func NewRedactor(env []string) *Redactor {
	r := &Redactor{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		// A path (SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS) names where a
		// secret is, and replacing it would mangle every path below it.
		if IsSecret(k) && len(v) >= 6 && !strings.HasPrefix(v, "/") {
			r.values = append(r.values, v)
		}
	}
	return r
}

// Redact returns s with every known secret value replaced.
func (r *Redactor) Redact(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}

// mergeEnv returns base with the overrides applied in order; later wins.
func mergeEnv(base []string, overrides ...map[string]string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+8)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, m := range overrides {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kv := k + "=" + m[k]
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// setEnv sets name=value in env.
func setEnv(env []string, pairs ...string) []string {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("setEnv: odd pairs %v", pairs))
	}
	m := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	out := make([]string, 0, len(env)+len(m))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := m[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, pairs[i]+"="+pairs[i+1])
	}
	return out
}

func lookup(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// RedactBytes is Redact for file contents.
func (r *Redactor) RedactBytes(b []byte) []byte {
	if len(r.values) == 0 {
		return b
	}
	return []byte(r.Redact(string(b)))
}

// redactTree rewrites the files the harness wrote under root so that no
// secret value of the run's environment remains in them. Inputs as given
// (experiment.yaml, adapter.yaml) and what workloads wrote to their output
// are left as they are: they are the user's own evidence.
func (r *Redactor) redactTree(root string) error {
	if len(r.values) == 0 {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if d.Name() == "output" && strings.HasPrefix(rel, "workloads"+string(filepath.Separator)) {
				return filepath.SkipDir
			}
			return nil
		}
		switch rel {
		case "experiment.yaml", "adapter.yaml",
			// Redacted as they are written, and still open for writing.
			"timeline.jsonl", filepath.Join("logs", "harness.log"), filepath.Join("system", "watch", "docker-events.jsonl"):
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 256<<20 {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		clean := r.RedactBytes(data)
		if string(clean) == string(data) {
			return nil
		}
		return WriteRedacted(p, clean)
	})
}

// WriteRedacted replaces a file's content atomically, keeping its mode, so
// a reader never sees half of it.
func WriteRedacted(p string, data []byte) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := rundir.WriteFileAtomic(p, data); err != nil {
		return err
	}
	return os.Chmod(p, st.Mode().Perm())
}

// RedactVerdict replaces secret values in what a verdict says: check
// details, errors and warnings (a shell check may print anything).
func (r *Redactor) RedactVerdict(v *rundir.Verdict) {
	if len(r.values) == 0 || v == nil {
		return
	}
	for i := range v.Checks {
		v.Checks[i].Detail = r.Redact(v.Checks[i].Detail)
	}
	for i := range v.Errors {
		v.Errors[i] = r.Redact(v.Errors[i])
	}
	for i := range v.Warnings {
		v.Warnings[i] = r.Redact(v.Warnings[i])
	}
}

// NewRedactorFor collects the secrets a run of x on a may have seen: the
// harness's environment and both manifests' env maps. Offline evaluation
// uses it, as the run's own environment is gone.
func NewRedactorFor(env []string, maps ...map[string]string) *Redactor {
	return NewRedactor(mergeEnv(env, maps...))
}

// unsetEnv removes name from env.
func unsetEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}
