package redact

import "testing"

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"API_TOKEN": true, "GITHUB_TOKEN": true, "DB_PASSWORD": true, "AWS_SECRET_ACCESS_KEY": true,
		"DAYTONA_API_KEY": true, "PRIVATE_KEY": true, "apikey": true, "OAUTH_CLIENT_SECRET": true,
		"AUTH": true, "HTTP_AUTH": true, "SESSION_KEY": true, "PGPASSWORD": true, "PASSWORD": true,
		"AUTHOR": false, "TICKS": false, "PATH": false, "TOKENIZER_MODE": false, "KEYS": false, "HOME": false,
	} {
		if got := IsSecret(name); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", name, got, want)
		}
	}
}
