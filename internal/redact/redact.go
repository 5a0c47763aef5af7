// Package redact keeps secrets out of what the harness writes. It knows
// the secrets of a run (the values of secret-looking variables, those the
// manifests mark with secrets: env, text their secrets: patterns match,
// credentials in URLs and Authorization values) and replaces each in every
// form the harness writes it: as is, escaped as Go's encoding/json writes
// strings, as html/template escapes text, as package markdown escapes
// text, and quoted by Go's %q. It never replaces the run's own names and
// words (workloads, instances, checks, operations, event and field names):
// a value too short or too common to be a secret is left alone, and said
// so. Both a run and the commands that read one afterwards use it.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/markdown"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Mark replaces a secret value.
const Mark = "<redacted>"

// MinLength is the shortest value redacted by its variable: a shorter one
// would replace common text (and names) everywhere, and is warned about.
const MinLength = 8

// The words of a variable name that mark its value as a secret, as the
// regular expressions below say them. Names are split at _, - and . so
// AUTHOR is not AUTH. IsSecret decides an ASCII name (every real one) by
// hand, a hundred times faster than the expressions, which a run asks of
// each of its variables; the expressions stay the definition, and decide
// any other name.
var (
	// secretWord is a whole word.
	secretWord = lazyRegexp(`(?i)^(secrets?|tokens?|passwords?|passwd|pwd|passphrase|apikey|credentials?|creds|auth|authorization|cookies?|signature|pat|dsn)$`)
	// secretSuffix catches glued names such as PGPASSWORD and GHTOKEN.
	secretSuffix = lazyRegexp(`(?i)(password|passwd|secret|token)s?$`)
	// secretPair matches two-word markers such as API_KEY and PRIVATE_KEY.
	secretPair = lazyRegexp(`(?i)(^|[_.-])(api|access|secret|private|session|signing|encryption)[_.-]?keys?($|[_.-])`)
	nameWords  = lazyRegexp(`[_.-]+`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// IsSecret reports whether an environment variable's name looks like it
// holds a secret.
func IsSecret(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return isSecretRegexp(name)
		}
	}
	return isSecretASCII(strings.ToLower(name))
}

// isSecretRegexp is IsSecret by the regular expressions.
func isSecretRegexp(name string) bool {
	if secretPair().MatchString(name) {
		return true
	}
	for _, w := range nameWords().Split(name, -1) {
		if secretWord().MatchString(w) || secretSuffix().MatchString(w) {
			return true
		}
	}
	return false
}

var (
	secretWords    = map[string]bool{"secret": true, "secrets": true, "token": true, "tokens": true, "password": true, "passwords": true, "passwd": true, "pwd": true, "passphrase": true, "apikey": true, "credential": true, "credentials": true, "creds": true, "auth": true, "authorization": true, "cookie": true, "cookies": true, "signature": true, "pat": true, "dsn": true}
	secretSuffixes = []string{"password", "passwd", "secret", "token"}
	pairFirsts     = []string{"api", "access", "secret", "private", "session", "signing", "encryption"}
)

func isNameSep(c byte) bool { return c == '_' || c == '.' || c == '-' }

// isSecretASCII is IsSecret of a lower-case ASCII name, by hand.
func isSecretASCII(n string) bool {
	// secretPair: at the start or after a separator, a first word, at
	// most one separator, key or keys, then the end or a separator.
	for i := 0; i < len(n); i++ {
		if i > 0 && !isNameSep(n[i-1]) {
			continue
		}
		for _, first := range pairFirsts {
			r, ok := strings.CutPrefix(n[i:], first)
			if !ok {
				continue
			}
			if r != "" && isNameSep(r[0]) {
				r = r[1:]
			}
			r, ok = strings.CutPrefix(r, "key")
			if !ok {
				continue
			}
			if r != "" && r[0] == 's' {
				r = r[1:]
			}
			if r == "" || isNameSep(r[0]) {
				return true
			}
		}
	}
	for w := range strings.FieldsFuncSeq(n, func(r rune) bool { return r < utf8.RuneSelf && isNameSep(byte(r)) }) {
		if secretWords[w] {
			return true
		}
		w = strings.TrimSuffix(w, "s")
		for _, suf := range secretSuffixes {
			if strings.HasSuffix(w, suf) {
				return true
			}
		}
	}
	return false
}

// pattern is a regular expression for secret text: what its groups match,
// or its whole match when it has none, is redacted. quick, when set, is a
// cheap test that text may hold a match; keep, when set, vetoes a match.
type pattern struct {
	re    *regexp.Regexp
	quick func(string) bool
	keep  func(string) bool
}

// builtin patterns: credentials in URLs (scheme://user:PASSWORD@host),
// Authorization values (header or variable; Basic, Bearer, Token...) and
// bearer tokens anywhere.
var builtin = []pattern{
	{re: regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@"'<>]*:([^\s/?#@"'<>]+)@`),
		quick: hasURLPassword},
	{re: regexp.MustCompile(`(?i)\b(?:proxy-)?authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey)[ \t]+)?([^\s"'<>,;\\]{4,})`),
		quick: func(s string) bool { return containsAny(s, "uthorization", "UTHORIZATION") }},
	{re: regexp.MustCompile(`(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{8,}=*)`),
		quick: func(s string) bool { return containsAny(s, "earer", "EARER") },
		// "bearer authentication" is prose; a token has a digit or a sign.
		keep: func(m string) bool { return !strings.ContainsAny(m, "0123456789._~+/-=") }},
}

// hasURLPassword reports whether some "://" in s is followed by
// user:password@, as the first builtin pattern needs: a page full of
// links without credentials (report.html) is then never run through the
// regular expression.
func hasURLPassword(s string) bool {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return false
		}
		s = s[i+3:]
		colon := false
	scan:
		for j := 0; j < len(s); j++ {
			switch c := s[j]; c {
			case ':':
				colon = true
			case '@':
				if colon {
					return true
				}
				break scan
			case ' ', '\t', '\n', '\r', '\f', '/', '?', '#', '"', '\'', '<', '>':
				break scan
			}
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Redactor replaces a run's secrets in text. A nil Redactor replaces
// nothing.
type Redactor struct {
	values   []string
	patterns []pattern
	// protect holds the run's names and words, each between NULs: a value
	// or a match inside one is never replaced.
	protect string
	// names are the variables whose values are secrets, whatever they
	// look like (secrets: env).
	names   map[string]bool
	skipped []Skipped

	once       sync.Once
	text, html *strings.Replacer
}

// Skipped is a variable whose value looks secret by its name but is not
// redacted, and why.
type Skipped struct{ Name, Reason string }

// Warning says so in words, naming the variable and never the value.
func (s Skipped) Warning() string {
	return fmt.Sprintf("the value of %s is not redacted: %s", s.Name, s.Reason)
}

// New collects the secret values found in env.
func New(env []string) *Redactor { return For(env, nil, nil) }

// For collects the secrets a run may have seen: those of env (the
// harness's environment, or the run's whole base environment), of the
// manifests' env maps and of each workload's env, the variables and
// patterns their secrets sections mark, and the run's own names, which are
// never replaced. x and a may be nil. A run and the commands that read it
// offline (evaluate, report, evidence, share) use it the same way.
func For(env []string, x *experiment.Experiment, a *adapter.Adapter) *Redactor {
	r := &Redactor{names: map[string]bool{}, patterns: slices.Clone(builtin)}
	var maps []map[string]string
	var secrets []*experiment.Secrets
	if a != nil {
		maps, secrets = append(maps, a.Env), append(secrets, a.Secrets)
	}
	if x != nil {
		maps, secrets = append(maps, x.Env), append(secrets, x.Secrets)
	}
	for _, s := range secrets {
		if s == nil {
			continue
		}
		for _, n := range s.Env {
			r.names[n] = true
		}
		for _, p := range s.Patterns {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString("") {
				r.patterns = append(r.patterns, pattern{re: re})
			}
		}
	}
	envs := [][]string{envvar.Merge(env, maps...)}
	if x != nil {
		for _, w := range x.Workloads {
			envs = append(envs, envvar.Merge(nil, w.Env))
		}
	}
	r.protect = protected(x, a, envs)
	seen := map[string]bool{}
	skipped := map[string]bool{}
	for _, e := range envs {
		for _, kv := range e {
			k, v, _ := strings.Cut(kv, "=")
			if v == "" {
				continue
			}
			if r.secretName(k) {
				// A path (SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS)
				// names where a secret is, and replacing it would mangle
				// every path below it.
				if strings.HasPrefix(v, "/") {
					continue
				}
				if why := r.tooCommon(v); why != "" {
					if !skipped[k] {
						skipped[k] = true
						r.skipped = append(r.skipped, Skipped{k, why})
					}
					continue
				}
				r.addValue(v, seen)
			}
			// Credentials inside any value (DATABASE_URL) are secrets
			// wherever they appear, in any form.
			for _, m := range r.matches(v) {
				if r.tooCommon(m) == "" {
					r.addValue(m, seen)
				}
			}
		}
	}
	// Longest first, so a value inside another never splits it.
	sort.SliceStable(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

func (r *Redactor) addValue(v string, seen map[string]bool) {
	if !seen[v] {
		seen[v] = true
		r.values = append(r.values, v)
	}
}

// secretName reports whether a variable's value is a secret by its name.
func (r *Redactor) secretName(k string) bool { return IsSecret(k) || r.names[k] }

var number = regexp.MustCompile(`^[+-]?[0-9]+([.,][0-9]+)*$`)

// common are values that name no secret, however their variable is named.
var common = map[string]bool{"localhost": true, "127.0.0.1": true, "0.0.0.0": true, "undefined": true, "disabled": true, "enabled": true}

// tooCommon says why a value is not one to replace wherever it appears,
// "" when it is.
func (r *Redactor) tooCommon(v string) string {
	switch {
	case len(v) < MinLength:
		return fmt.Sprintf("it is shorter than %d characters, and replacing it wherever it appears would corrupt the run's evidence; a secret that short is no secret", MinLength)
	case number.MatchString(v):
		return "it is a number, and replacing it would corrupt the run's times, counts and ports"
	case common[strings.ToLower(v)]:
		return "it is a common word, not a secret"
	case r.isProtected(v):
		return "it is, or is part of, a name or word the run itself uses (a workload, an instance, a check, an operation, an event or field name)"
	}
	return ""
}

// isProtected reports whether s is one of the run's names or words, or
// part of one.
func (r *Redactor) isProtected(s string) bool {
	return s != "" && !strings.Contains(s, "\x00") && strings.Contains(r.protect, s)
}

// Skipped lists the variables whose values look secret by name but are
// not redacted, and why.
func (r *Redactor) Skipped() []Skipped {
	if r == nil {
		return nil
	}
	return r.skipped
}

// Warnings are Skipped in words.
func (r *Redactor) Warnings() []string {
	var out []string
	for _, s := range r.Skipped() {
		out = append(out, s.Warning())
	}
	return out
}

// EnvFile renders env as sorted NAME=value lines for an instance's env
// file: the value of every variable whose name looks secret, or that the
// manifests mark secret, is Mark (unless it is empty), and every other
// value has the secrets inside it replaced.
func (r *Redactor) EnvFile(env []string) []byte {
	lines := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case v == "":
		case IsSecret(k) || r != nil && r.names[k]:
			v = Mark
		default:
			v = r.String(v)
		}
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// String returns s with every secret replaced, in every form.
func (r *Redactor) String(s string) string { return r.redact(s, false) }

// Bytes is String for file contents: JSON, logs, Markdown.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	s := string(b)
	if out := r.redact(s, false); out != s {
		return []byte(out)
	}
	return b
}

// HTML is Bytes for an HTML page: a secret found as it is (in a page, text
// with nothing to escape) becomes &lt;redacted&gt;, which reads
// <redacted>, rather than a tag.
func (r *Redactor) HTML(b []byte) []byte {
	if r == nil {
		return b
	}
	s := string(b)
	if out := r.redact(s, true); out != s {
		return []byte(out)
	}
	return b
}

func (r *Redactor) redact(s string, html bool) string {
	if r == nil || s == "" {
		return s
	}
	r.once.Do(r.build)
	if html {
		s = r.html.Replace(s)
	} else {
		s = r.text.Replace(s)
	}
	mark := Mark
	if html {
		mark = htmlMark
	}
	for _, p := range r.patterns {
		s = r.replaceMatches(p, s, mark)
	}
	return s
}

var htmlMark = htmlEscape(Mark)

// build makes the replacers: every form of every value, longest first, to
// the same form of Mark.
func (r *Redactor) build() {
	var text, html []string
	seen := map[string]bool{}
	type pair struct{ form, mark string }
	var pairs []pair
	for _, v := range r.values {
		for _, f := range forms(v) {
			if !seen[f[0]] && !r.isProtected(f[0]) {
				seen[f[0]] = true
				pairs = append(pairs, pair{f[0], f[1]})
			}
		}
	}
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i].form) > len(pairs[j].form) })
	for _, p := range pairs {
		text = append(text, p.form, p.mark)
		html = append(html, p.form, strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(p.mark))
	}
	r.text, r.html = strings.NewReplacer(text...), strings.NewReplacer(html...)
}

// replaceMatches replaces what p's groups (or its whole match) matched in
// s, but for text that is one of the run's names or already a mark.
func (r *Redactor) replaceMatches(p pattern, s, mark string) string {
	if p.quick != nil && !p.quick(s) {
		return s
	}
	idx := p.re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		spans := [][2]int{{m[0], m[1]}}
		if len(m) > 2 {
			spans = spans[:0]
			for g := 2; g+1 < len(m); g += 2 {
				if m[g] >= 0 && m[g+1] > m[g] {
					spans = append(spans, [2]int{m[g], m[g+1]})
				}
			}
		}
		for _, sp := range spans {
			if sp[0] < last {
				continue // nested groups: the outer one is replaced
			}
			t := s[sp[0]:sp[1]]
			if t == Mark || t == htmlMark || strings.Contains(t, Mark) || strings.Contains(t, htmlMark) || r.isProtected(t) || p.keep != nil && p.keep(t) {
				continue
			}
			b.WriteString(s[last:sp[0]])
			b.WriteString(mark)
			last = sp[1]
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// matches returns what the patterns would replace in s.
func (r *Redactor) matches(s string) []string {
	var out []string
	for _, p := range r.patterns {
		if p.quick != nil && !p.quick(s) {
			continue
		}
		for _, m := range p.re.FindAllStringSubmatch(s, -1) {
			if len(m) == 1 {
				out = append(out, m[0])
			}
			for _, g := range m[1:] {
				if g != "" && (p.keep == nil || !p.keep(g)) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// escapers are the ways the harness writes a string: escaped for JSON
// (with and without HTML escaping), quoted by %q, escaped by html/template
// (text and attributes) and by html.EscapeString, escaped for Markdown
// (running text and table cells), and escaped for URLs.
var escapers = []func(string) string{
	func(s string) string { return jsonString(s, true) },
	func(s string) string { return jsonString(s, false) },
	func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] },
	htmlEscape,
	strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace,
	func(s string) string { return markdown.Inline("x" + s)[1:] },
	markdown.Cell,
	url.QueryEscape,
	url.PathEscape,
}

// htmlEscape escapes as html/template does in text and quoted attributes.
var htmlEscape = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;").Replace

func jsonString(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// forms returns every form of v the harness may write, each with the same
// form of Mark: v itself, each escaping of it, and each escaping of an
// escaping (a JSON line inside a JSON string, a log line in a page).
func forms(v string) [][2]string {
	out := [][2]string{{v, Mark}}
	seen := map[string]bool{v: true}
	add := func(f, m string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, [2]string{f, m})
		}
	}
	for _, e1 := range escapers {
		f1, m1 := e1(v), e1(Mark)
		add(f1, m1)
		for _, e2 := range escapers {
			add(e2(f1), e2(m1))
		}
	}
	return out
}

// Tree rewrites the files the harness wrote under root so that no secret
// remains in them. Inputs as given (experiment.yaml, adapter.yaml), what
// workloads wrote to their output, and the files skip names (relative
// to root; they are redacted as they are written) are left as they are.
func (r *Redactor) Tree(root string, skip ...string) error {
	if r == nil {
		return nil
	}
	var errs []error
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
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
		var clean []byte
		if strings.HasSuffix(p, ".html") {
			clean = r.HTML(data)
		} else {
			clean = r.Bytes(data)
		}
		if bytes.Equal(clean, data) {
			return nil
		}
		if err := replace(p, clean); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// replace rewrites a file atomically, keeping its mode, so a reader never
// sees half of it. On a full disk, with no room for a copy, it overwrites
// the file in place instead: only what grows past the old size needs room,
// and when even that fails the file is cut to what was written, which
// holds no secret (the error says so).
func replace(p string, data []byte) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := rundir.WriteFileAtomic(p, data); err == nil {
		return os.Chmod(p, st.Mode().Perm())
	} else if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.WriteAt(data, 0)
	if err != nil {
		terr := f.Truncate(int64(n))
		return fmt.Errorf("rewriting %s in place: %w; cut to the %d bytes rewritten (%v)", p, err, n, terr)
	}
	return f.Truncate(int64(len(data)))
}

// Verdict replaces secret values in what a verdict says: check details,
// errors and warnings (a shell check may print anything).
func (r *Redactor) Verdict(v *rundir.Verdict) {
	if r == nil || v == nil {
		return
	}
	// Every string the verdict holds, whatever field it is in: a history
	// checker's findings carry the values the workloads wrote (a secret
	// among them), and a field added later is covered too.
	r.strings(reflect.ValueOf(v).Elem())
}

// strings replaces the secrets in every string reachable from v.
func (r *Redactor) strings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() && v.Len() > 0 {
			if s := r.String(v.String()); s != v.String() {
				v.SetString(s)
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			r.strings(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				r.strings(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes (json.RawMessage): not text the verdict shows
		}
		for i := 0; i < v.Len(); i++ {
			r.strings(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.String {
				if s := r.String(e.String()); s != e.String() {
					v.SetMapIndex(k, reflect.ValueOf(s).Convert(e.Type()))
				}
			}
		}
	}
}

// protected returns the run's names and words, each between NULs: the
// manifests' names (ids, workloads and every instance, operations, checks,
// targets, roles, signals, watchers, metrics, ports, locks), the names of
// every variable, the events and fields of the timeline, and every key
// and enumerated value of the manifests and of the JSON files of a run.
func protected(x *experiment.Experiment, a *adapter.Adapter, envs [][]string) string {
	var b strings.Builder
	b.WriteString(vocabulary())
	add := func(words ...string) {
		for _, w := range words {
			if w != "" {
				b.WriteString(w)
				b.WriteByte(0)
			}
		}
	}
	add(Mark, htmlMark)
	for _, e := range envs {
		for _, kv := range e {
			k, _, _ := strings.Cut(kv, "=")
			add(k)
		}
	}
	if x != nil {
		add(x.ID, x.DefaultAdapter)
		add(x.Metrics...)
		for _, w := range x.Workloads {
			add(w.Name)
			for i := range min(w.InstanceCount(), 100_000) {
				add(experiment.InstanceName(w.Name, i))
			}
		}
		for _, o := range x.Operations {
			add(o.Name, o.Uses)
		}
		x.EachCheck(func(_ string, c *experiment.Check) { add(c.Name) })
		for _, s := range x.Preflight {
			add(s.Name)
		}
		if x.Flow != nil {
			x.Flow.Walk(func(f *experiment.FlowNode) { add(f.Path, f.Label()) })
		}
	}
	if a != nil {
		add(a.ID, a.Backend)
		add(a.TargetNames()...)
		for _, m := range []map[string]bool{keys(a.Roles), keys(a.Operations), keys(a.Signals)} {
			for k := range m {
				add(k)
			}
		}
		for _, w := range a.Watch {
			add(w.Name)
		}
		for _, m := range a.Metrics {
			add(m.Name)
		}
		for _, s := range append(slices.Clone(a.Preflight), a.Checks...) {
			add(s.Name)
		}
		add(a.Ports...)
		add(a.Locks...)
	}
	return "\x00" + b.String()
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

var vocab = sync.OnceValue(func() string {
	var b strings.Builder
	add := func(w string) {
		if w != "" {
			b.WriteString(w)
			b.WriteByte(0)
		}
	}
	for _, e := range rundir.Events {
		add(e.Name)
		for _, f := range e.Fields {
			add(f)
		}
	}
	for _, w := range []string{
		rundir.VerdictPass, rundir.VerdictFail, rundir.VerdictError, rundir.VerdictInconclusive, rundir.VerdictXFail, rundir.VerdictNA,
		rundir.ResultOK, rundir.ResultFail, rundir.ResultXFail, rundir.ResultXPass, rundir.ResultError, rundir.ResultInconclusive,
		rundir.ScopePreflight, rundir.ScopeWorkload, rundir.ScopeExperiment, rundir.ScopeAdapter,
		"Created", "Pending", "Running", "Succeeded", "Failed", "Unknown", "flow end",
	} {
		add(w)
	}
	for _, f := range experiment.Faults {
		add(f)
	}
	seen := map[reflect.Type]bool{}
	for _, v := range []any{experiment.Experiment{}, adapter.Adapter{}, rundir.Verdict{}, rundir.Manifest{}, rundir.Scrape{}} {
		tagWords(reflect.TypeOf(v), seen, add)
	}
	return b.String()
})

func vocabulary() string { return vocab() }

// tagWords adds the yaml and json keys of t's fields, and the values their
// jsonschema tags enumerate, recursively.
func tagWords(t reflect.Type, seen map[reflect.Type]bool, add func(string)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		for _, tag := range []string{"yaml", "json"} {
			name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
			if name != "-" {
				add(name)
			}
		}
		for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
			if v, ok := strings.CutPrefix(part, "enum="); ok {
				add(v)
			}
		}
		tagWords(f.Type, seen, add)
	}
}
