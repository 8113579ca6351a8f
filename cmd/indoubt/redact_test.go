package main

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// refPassword is a password of the same shape as pw (its punctuation kept, its letters
// and digits replaced by a longer run, a run prefixed): a masking that depends on the
// password, its length or where its characters occur elsewhere prints differently
// for the two.
func refPassword(pw string) string {
	return "Zq9" + regexp.MustCompile(`[A-Za-z0-9]+`).ReplaceAllString(pw, "Zq9Zq9Zq9")
}

var (
	ports   = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	garbled = regexp.MustCompile(`[A-Za-z0-9]xxxxx|xxxxx[A-Za-z0-9]`)
)

// TestRunRedactsSecretsAsTokens: a password given in a DSN is masked where it stands in
// the DSN, never where its letters occur in a message. For short, common-word and
// punctuation passwords, in every DSN shape of every store (escaped and raw), a run
// that cannot connect (nothing listening, or a real PostgreSQL refusing the password,
// directly and through the proxy) prints the same one line as with a different
// password of the same shape, and nothing in it is garbled.
func TestRunRedactsSecretsAsTokens(t *testing.T) {
	srv := startPostgres(t)
	esc := func(pw string) string { return strings.TrimPrefix(url.UserPassword("", pw).String(), ":") }
	type form struct {
		name  string
		store string
		dsn   func(pw string) string
		exact bool // the driver's message is deterministic: compare it with the reference
		fault bool
	}
	forms := []form{
		{"postgres url", "", func(pw string) string { return "postgres://u:" + esc(pw) + "@127.0.0.1:1/x?connect_timeout=2" }, true, false},
		{"postgres url, raw", "", func(pw string) string { return "postgres://u:" + pw + "@127.0.0.1:1/x?connect_timeout=2" }, true, false},
		{"postgres password parameter", "", func(pw string) string {
			return "postgres://u@127.0.0.1:1/x?connect_timeout=2&password=" + url.QueryEscape(pw)
		}, true, false},
		{"keyword=value", "postgres", func(pw string) string {
			return "host=127.0.0.1 port=1 user=u connect_timeout=2 password='" + strings.ReplaceAll(pw, `'`, `\'`) + "'"
		}, true, false},
		{"keyword=value, bare", "postgres", func(pw string) string { return "host=127.0.0.1 port=1 user=u connect_timeout=2 password=" + pw }, true, false},
		{"redis url", "", func(pw string) string { return "redis://:" + esc(pw) + "@127.0.0.1:1/0" }, true, false},
		{"redis url, raw", "", func(pw string) string { return "redis://:" + pw + "@127.0.0.1:1/0" }, true, false},
		{"cql url", "", func(pw string) string { return "cql://u:" + esc(pw) + "@127.0.0.1:1/ks" }, true, false},
		{"cql url, raw", "", func(pw string) string { return "cql://u:" + pw + "@127.0.0.1:1/ks" }, true, false},
		{"mongodb url", "", func(pw string) string {
			return "mongodb://u:" + esc(pw) + "@127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
		}, false, false},
		{"mongodb url, raw", "", func(pw string) string {
			return "mongodb://u:" + pw + "@127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
		}, false, false},
		{"postgres refusing the password", "", func(pw string) string {
			return "postgres://indoubt:" + esc(pw) + "@" + srv.Addr + "/indoubt?sslmode=disable"
		}, true, false},
		{"postgres refusing the password, through the proxy", "", func(pw string) string {
			return "postgres://indoubt:" + esc(pw) + "@" + srv.Addr + "/indoubt?sslmode=disable"
		}, true, true},
	}
	// runWith returns the exit code, whether stderr is one line, and what was printed.
	runWith := func(t *testing.T, f form, pw string) (int, bool, string) {
		args := []string{"run", "--quiet", "--out", t.TempDir(), "--workers", "1", "--ops", "3", "--dsn", f.dsn(pw)}
		if f.store != "" {
			args = append(args, "--store", f.store)
		}
		if f.fault {
			args = append(args, "--fault", "commit-cut:0.1")
		}
		code, stdout, stderr := invoke(t, args...)
		return code, strings.Count(stderr, "\n") == 1, ports.ReplaceAllString(stdout+stderr, "127.0.0.1:PORT")
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			for _, pw := range []string{"p", "connect", "postgres", "127", "%", "a:b@c"} {
				code, oneLine, out := runWith(t, f, pw)
				if code != 3 || !oneLine {
					t.Errorf("password %q: exit %d, want 3 and one line: %q", pw, code, out)
				}
				if m := garbled.FindString(out); m != "" {
					t.Errorf("password %q: the message is garbled (%q): %s", pw, m, out)
				}
				if pw != "p" && pw != "postgres" && pw != "127" && pw != "connect" && strings.Contains(out, pw) {
					t.Errorf("password %q printed: %s", pw, out)
				}
				if !f.exact {
					continue
				}
				ref := refPassword(pw)
				_, _, want := runWith(t, f, ref)
				if strings.Contains(want, "Zq9") {
					t.Errorf("reference password %q printed: %s", ref, want)
				}
				if out != want {
					t.Errorf("password %q: the message depends on the password:\n got %s\nwant %s (password %q)", pw, out, want, ref)
				}
			}
		})
	}
}
