// Package redact keeps secrets out of what the harness writes: it finds
// secret-looking variables in an environment and replaces their values
// wherever they appear. Both a run and an offline evaluation use it.
package redact

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Mark replaces a secret value.
const Mark = "<redacted>"

// secretWord matches the words of a variable name that mark its value as a
// secret. Names are split at _, - and . so AUTHOR is not AUTH.
var secretWord = regexp.MustCompile(`(?i)^(secrets?|tokens?|passwords?|passwd|pwd|passphrase|apikey|credentials?|creds|auth|cookies?|signature|pat|dsn)$`)

// secretSuffix catches glued names such as PGPASSWORD and GHTOKEN.
var secretSuffix = regexp.MustCompile(`(?i)(password|passwd|secret|token)s?$`)

// secretPair matches two-word markers such as API_KEY and PRIVATE_KEY.
var secretPair = regexp.MustCompile(`(?i)(^|[_.-])(api|access|secret|private|session|signing|encryption)[_.-]?keys?($|[_.-])`)

var nameWords = regexp.MustCompile(`[_.-]+`)

// IsSecret reports whether an environment variable's name looks like it
// holds a secret.
func IsSecret(name string) bool {
	if secretPair.MatchString(name) {
		return true
	}
	for _, w := range nameWords.Split(name, -1) {
		if secretWord.MatchString(w) || secretSuffix.MatchString(w) {
			return true
		}
	}
	return false
}

// EnvFile renders env as sorted NAME=value lines with secret values
// replaced, for an instance's env file.
func EnvFile(env []string) []byte {
	lines := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if IsSecret(k) && v != "" {
			v = Mark
		}
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// Redactor replaces the values of secret-looking variables in text.
type Redactor struct{ values []string }

// New collects the secret values found in env.
func New(env []string) *Redactor {
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

// For collects the secrets a run may have seen: the harness's environment
// and the manifests' env maps. Offline evaluation uses it, as the run's own
// environment is gone.
func For(env []string, maps ...map[string]string) *Redactor {
	return New(envvar.Merge(env, maps...))
}

// String returns s with every known secret value replaced.
func (r *Redactor) String(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Mark)
	}
	return s
}

// Bytes is String for file contents.
func (r *Redactor) Bytes(b []byte) []byte {
	if len(r.values) == 0 {
		return b
	}
	return []byte(r.String(string(b)))
}

// Tree rewrites the files the harness wrote under root so that no secret
// value remains in them. Inputs as given (experiment.yaml, adapter.yaml),
// what workloads wrote to their output, and the files skip names (relative
// to root; they are redacted as they are written) are left as they are.
func (r *Redactor) Tree(root string, skip ...string) error {
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
		if rel == "experiment.yaml" || rel == "adapter.yaml" {
			return nil
		}
		for _, s := range skip {
			if rel == filepath.Clean(s) {
				return nil
			}
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
		clean := r.Bytes(data)
		if string(clean) == string(data) {
			return nil
		}
		return replace(p, clean)
	})
}

// replace rewrites a file atomically, keeping its mode, so a reader never
// sees half of it.
func replace(p string, data []byte) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := rundir.WriteFileAtomic(p, data); err != nil {
		return err
	}
	return os.Chmod(p, st.Mode().Perm())
}

// Verdict replaces secret values in what a verdict says: check details,
// errors and warnings (a shell check may print anything).
func (r *Redactor) Verdict(v *rundir.Verdict) {
	if len(r.values) == 0 || v == nil {
		return
	}
	for i := range v.Checks {
		v.Checks[i].Detail = r.String(v.Checks[i].Detail)
	}
	for i := range v.Errors {
		v.Errors[i] = r.String(v.Errors[i])
	}
	for i := range v.Warnings {
		v.Warnings[i] = r.String(v.Warnings[i])
	}
}
