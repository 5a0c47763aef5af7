package redact

import (
	"strings"
	"testing"
)

// IsSecret decides an ASCII name by hand; the regular expressions are the
// definition. Every name made of up to three of these pieces, in every case,
// gets the same answer both ways.
func TestIsSecretByHandIsTheExpressions(t *testing.T) {
	pieces := []string{"api", "ACCESS", "Secret", "private", "session", "signing", "encryption", "key", "KEYS", "s", "token",
		"password", "passwd", "pwd", "auth", "AUTHOR", "cookie", "pat", "dsn", "creds", "credential", "apikey", "passphrase",
		"signature", "authorization", "x", "my", "gh", "pg", "_", "-", ".", "__", "k", "ey", "1"}
	n := 0
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if prefix != "" {
			for _, name := range []string{prefix, strings.ToUpper(prefix)} {
				n++
				if got, want := isSecretASCII(strings.ToLower(name)), isSecretRegexp(name); got != want {
					t.Fatalf("%q: by hand %v, by the expressions %v", name, got, want)
				}
			}
		}
		if depth == 3 {
			return
		}
		for _, p := range pieces {
			walk(prefix+p, depth+1)
		}
	}
	walk("", 0)
	if n < 90000 {
		t.Fatalf("only %d names compared", n)
	}
	// A name that is not ASCII is decided by the expressions, whose (?i)
	// folds the Kelvin sign to k and the long s to s.
	for _, tc := range []struct {
		name string
		want bool
	}{{"API_\u212aEY", true}, {"GH_TOKEN\u017f", true}, {"AUTHOR_\u00e9", false}} {
		if got := IsSecret(tc.name); got != tc.want {
			t.Errorf("IsSecret(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
