package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/markdown"
)

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"API_TOKEN": true, "GITHUB_TOKEN": true, "DB_PASSWORD": true, "AWS_SECRET_ACCESS_KEY": true,
		"DAYTONA_API_KEY": true, "PRIVATE_KEY": true, "apikey": true, "OAUTH_CLIENT_SECRET": true,
		"AUTH": true, "HTTP_AUTH": true, "SESSION_KEY": true, "PGPASSWORD": true, "PASSWORD": true,
		"AUTHORIZATION": true, "PROXY_AUTHORIZATION": true, "AUTHOR": false, "TICKS": false, "PATH": false, "TOKENIZER_MODE": false, "KEYS": false, "HOME": false,
	} {
		if got := IsSecret(name); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestEveryFormIsRedacted(t *testing.T) {
	secret := `pa&ss<wo>rd"q\x'y+z`
	r := New([]string{"DB_PASSWORD=" + secret})
	for _, f := range forms(secret) {
		text := "before " + f[0] + " after"
		if got := r.String(text); strings.Contains(got, "x'y") || strings.Contains(got, f[0]) {
			t.Errorf("form %q is not redacted: %q", f[0], got)
		}
	}
	// The forms the harness writes, made the way it makes them.
	j, _ := json.Marshal(secret)
	var page bytes.Buffer
	template.Must(template.New("").Parse(`<p title="{{.}}">{{.}}</p>`)).Execute(&page, secret)
	for _, text := range []string{string(j), page.String(), markdown.Inline(secret), markdown.Cell(secret), fmt.Sprintf("%q", secret)} {
		if got := string(r.HTML([]byte(text))); strings.Contains(got, "rd") {
			t.Errorf("%q is not redacted: %q", text, got)
		}
	}
	if got := r.String(string(j)); got != `"\u003credacted\u003e"` {
		t.Errorf("JSON form: %q, want the mark as JSON writes it", got)
	}
	if got := string(r.HTML([]byte("<b>" + htmlEscape(secret) + "</b>"))); got != "<b>&lt;redacted&gt;</b>" {
		t.Errorf("HTML form: %q", got)
	}
}

func TestNamesAndCommonValuesStay(t *testing.T) {
	x, ps := experiment.Parse("x.yaml", []byte(`apiVersion: chaos/v1alpha1
id: names
workloads:
  - {name: counter-service, instances: 3, run: "true", checks: [{name: exited-ok, kind: exit-code}]}
flow: counter-service
`))
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	r := For([]string{"MY_TOKEN=counter", "A_SECRET=counter-service-2", "SHORT_PASSWORD=abc", "PORT_TOKEN=12345678", "HOST_SECRET=localhost", "FIELD_TOKEN=operation", "REAL_TOKEN=tok-1234567890", "KEY_PATH_SECRET=/run/secrets/x"}, x, nil)
	text := `{"workload": "counter-service", "instance": "counter-service-2", "event": "operation.reverted", "port": 12345678, "host": "localhost", "t": tok-1234567890}`
	want := `{"workload": "counter-service", "instance": "counter-service-2", "event": "operation.reverted", "port": 12345678, "host": "localhost", "t": <redacted>}`
	if got := r.String(text); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var names []string
	for _, s := range r.Skipped() {
		names = append(names, s.Name)
		if strings.Contains(s.Warning(), "abc") || !strings.Contains(s.Warning(), s.Name) {
			t.Errorf("warning %q: want the name, never the value", s.Warning())
		}
	}
	want2 := []string{"A_SECRET", "FIELD_TOKEN", "HOST_SECRET", "MY_TOKEN", "PORT_TOKEN", "SHORT_PASSWORD"}
	slices.Sort(names)
	if !slices.Equal(names, want2) {
		t.Errorf("skipped %v, want %v (a path is skipped silently)", names, want2)
	}
}

func TestCredentialPatterns(t *testing.T) {
	r := New(nil)
	for in, want := range map[string]string{
		"dial postgres://app:pg-pass-1@db:5432/x failed":            "dial postgres://app:<redacted>@db:5432/x failed",
		`{"url": "https://u:p%40ss@h/"}`:                            `{"url": "https://u:<redacted>@h/"}`,
		"Authorization: Bearer abc.def-123":                         "Authorization: Bearer <redacted>",
		"AUTHORIZATION=Basic dXNlcjpwYXNz":                          "AUTHORIZATION=Basic <redacted>",
		`{\"Authorization\":\"Token tok12345\"}`:                    `{\"Authorization\":\"Token <redacted>\"}`,
		"curl -H 'authorization: bearer eyJhbGciOi.J9x'":            "curl -H 'authorization: bearer <redacted>'",
		"sent bearer 0123456789abcdef":                              "sent bearer <redacted>",
		"bearer authentication is off; see https://example.com/a@b": "bearer authentication is off; see https://example.com/a@b",
		"ssh://git@github.com/x":                                    "ssh://git@github.com/x",
	} {
		if got := r.String(in); got != want {
			t.Errorf("%s\n got  %s\n want %s", in, got, want)
		}
	}
	// Credentials in a variable's value are secrets in every form too.
	r = New([]string{"DATABASE_URL=postgres://app:p&ss-word-9@db/x"})
	if got := r.String(`{"line": "pass p\u0026ss-word-9"}`); strings.Contains(got, "word-9") {
		t.Errorf("the JSON form of a URL's password is not redacted: %s", got)
	}
}

func TestUserSecrets(t *testing.T) {
	x, ps := experiment.Parse("x.yaml", []byte(`apiVersion: chaos/v1alpha1
id: mine
secrets: {env: [VENDOR_CODE], patterns: ['sk-[a-z]{6}', 'pin=([0-9]{4})']}
workloads:
  - {name: w, run: "true", env: {WL_TOKEN: workload-token-1}}
flow: w
`))
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	r := For([]string{"VENDOR_CODE=vendor-code-1"}, x, nil)
	in := "vendor-code-1 sk-abcdef pin=1234 workload-token-1"
	if got, want := r.String(in), "<redacted> <redacted> pin=<redacted> <redacted>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	env := string(r.EnvFile([]string{"VENDOR_CODE=vendor-code-1", "URL=https://u:pw-1234@h/", "PLAIN=sk-abcdef", "EMPTY_TOKEN="}))
	if want := "EMPTY_TOKEN=\nPLAIN=<redacted>\nURL=https://u:<redacted>@h/\nVENDOR_CODE=<redacted>\n"; env != want {
		t.Errorf("env file\n%s\nwant\n%s", env, want)
	}
	// Redacting twice changes nothing more.
	once := r.String(in)
	if twice := r.String(once); twice != once {
		t.Errorf("not idempotent: %q then %q", once, twice)
	}
}

// hasURLPassword lets through every text the URL-credentials pattern
// matches, and stops the text of a page full of plain links.
func TestHasURLPassword(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"postgres://app:s3cret@db:5432/x", true},
		{`<a href="http://example.com/a@b">`, false},
		{`<svg xmlns="http://www.w3.org/2000/svg">`, false},
		{"see http://host:8080/ and mail a@b", false},
		{"http://:pw@host", true},
		{"x://u:p\x0bw@h", true},
		{"no url at all", false},
	} {
		if got := hasURLPassword(tc.s); got != tc.want {
			t.Errorf("hasURLPassword(%q) = %v, want %v", tc.s, got, tc.want)
		}
		if builtin[0].re.MatchString(tc.s) && !hasURLPassword(tc.s) {
			t.Errorf("%q: the pattern matches, the quick check says no", tc.s)
		}
	}
}

func FuzzHasURLPassword(f *testing.F) {
	for _, s := range []string{"postgres://app:s3cret@db/x", "http://h/a@b", "a://b:c@", "x://u:p\x0bw@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if builtin[0].re.MatchString(s) && !hasURLPassword(s) {
			t.Fatalf("%q: the pattern matches, the quick check says no", s)
		}
	})
}
