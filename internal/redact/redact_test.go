package redact

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestDSN(t *testing.T) {
	cases := []struct {
		name, dsn, want string
	}{
		// URL user info, every scheme the stores accept.
		{"postgres user info", "postgres://indoubt:s3cret@127.0.0.1:5432/indoubt?sslmode=disable",
			"postgres://indoubt:xxxxx@127.0.0.1:5432/indoubt?sslmode=disable"},
		{"postgresql user info", "postgresql://root:pw@db:26257/defaultdb", "postgresql://root:xxxxx@db:26257/defaultdb"},
		{"multi-host postgres", "postgres://u:pw@h1:5432,h2:5433,[::1]:5434/db?target_session_attrs=read-write",
			"postgres://u:xxxxx@h1:5432,h2:5433,[::1]:5434/db?target_session_attrs=read-write"},
		{"redis password only", "redis://:pw@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"rediss user and password", "rediss://default:pw@cache:6380", "rediss://default:xxxxx@cache:6380"},
		{"redis password in query", "redis://127.0.0.1:6379/0?password=pw&dial_timeout=3s",
			"redis://127.0.0.1:6379/0?password=xxxxx&dial_timeout=3s"},
		{"mongodb multi-host", "mongodb://admin:pw@m1:27017,m2:27017/?replicaSet=rs0&authSource=admin",
			"mongodb://admin:xxxxx@m1:27017,m2:27017/?replicaSet=rs0&authSource=admin"},
		{"mongodb+srv", "mongodb+srv://app:pw@cluster0.example.net/shop?retryWrites=true",
			"mongodb+srv://app:xxxxx@cluster0.example.net/shop?retryWrites=true"},
		{"mongodb tls key password", "mongodb://m1/?tls=true&tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=pw",
			"mongodb://m1/?tls=true&tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=xxxxx"},
		{"mongodb aws token", "mongodb://m1/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok",
			"mongodb://m1/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx"},
		{"mongodb semicolon options", "mongodb://m1/?authSource=admin;password=pw;w=1",
			"mongodb://m1/?authSource=admin;password=xxxxx;w=1"},
		{"cql user info", "cql://cassandra:pw@127.0.0.1:9042/indoubt?consistency=quorum",
			"cql://cassandra:xxxxx@127.0.0.1:9042/indoubt?consistency=quorum"},
		{"cql multi-host, password parameter", "cassandra://h1:9042,h2:9042/ks?username=c&password=pw",
			"cassandra://h1:9042,h2:9042/ks?username=c&password=xxxxx"},

		// Query parameters: any case, percent-encoded keys, every secret name.
		{"postgres password parameter", "postgres://u@h:5432/db?password=pw&sslmode=disable",
			"postgres://u@h:5432/db?password=xxxxx&sslmode=disable"},
		{"parameter case-insensitive", "postgres://h/db?PassWord=pw", "postgres://h/db?PassWord=xxxxx"},
		{"sslpassword kept apart from sslkey", "postgres://h/db?sslkey=/etc/k.pem&sslpassword=pw",
			"postgres://h/db?sslkey=/etc/k.pem&sslpassword=xxxxx"},
		{"pass and pwd", "redis://h:1/?pass=a&pwd=b&x=1", "redis://h:1/?pass=xxxxx&pwd=xxxxx&x=1"},
		{"percent-encoded key", "postgres://h/db?pass%77ord=pw", "postgres://h/db?pass%77ord=xxxxx"},
		{"encoded value", "postgres://h/db?password=a%26b%3Dc", "postgres://h/db?password=xxxxx"},
		{"raw & in value absorbs what cannot be a parameter", "postgres://h/db?password=a&b&sslmode=disable",
			"postgres://h/db?password=xxxxx&sslmode=disable"},
		{"fragment after password", "postgres://h/db?password=a#b", "postgres://h/db?password=xxxxx"},
		{"both user info and parameter", "postgres://u:one@h/db?password=two", "postgres://u:xxxxx@h/db?password=xxxxx"},
		{"authSource is not secret", "mongodb://h/?authSource=admin", "mongodb://h/?authSource=admin"},
		{"passfile is a path", "postgres://h/db?passfile=/root/.pgpass", "postgres://h/db?passfile=/root/.pgpass"},

		// User info with the characters that confuse a naive split.
		{"raw @ in password", "postgres://u:p@ss@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"raw / in password", "postgres://u:a/b@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"raw ? and # in password", "redis://:a?b#c@h:6379/0", "redis://:xxxxx@h:6379/0"},
		{"escaped password", "postgres://u:a%40b%2Fc@h/db", "postgres://u:xxxxx@h/db"},
		{"empty password", "redis://:@h:6379", "redis://:xxxxx@h:6379"},
		{"user without password", "postgres://indoubt@h:5432/db", "postgres://indoubt@h:5432/db"},
		{"@ in a query value", "postgres://h/db?application_name=me@x&password=pw",
			"postgres://h/db?application_name=me@x&password=xxxxx"},
		{"@ after the password parameter", "postgres://h/db?password=pw&user=a@b",
			"postgres://h/db?password=xxxxx&user=a@b"},
		{"upper-case scheme", "POSTGRES://U:PW@H/DB", "POSTGRES://U:xxxxx@H/DB"},
		{"leading space", "  redis://:pw@h:1", "  redis://:xxxxx@h:1"},

		// libpq keyword=value.
		{"keyword value", "host=h port=5432 user=u password=pw dbname=d", "host=h port=5432 user=u password=xxxxx dbname=d"},
		{"quoted with spaces", "host=h password='a b c' dbname=d", "host=h password=xxxxx dbname=d"},
		{"quoted with escaped quote", `host=h password='it\'s \\ here' dbname=d`, "host=h password=xxxxx dbname=d"},
		{"unquoted escapes", `password=a\ b\'c dbname=d`, "password=xxxxx dbname=d"},
		{"space around =", "host=h password = pw  dbname=d", "host=h password = xxxxx  dbname=d"},
		{"sslpassword", "host=h sslkey=/k.pem sslpassword=pw", "host=h sslkey=/k.pem sslpassword=xxxxx"},
		{"unterminated quote", "host=h password='a b", "host=h password=xxxxx"},
		{"trailing backslash", `host=h password=ab\`, "host=h password=xxxxx"},
		{"empty value reads the next word, as pgx does", "password= host=h", "password= xxxxx"},
		{"unquoted spaces absorbed", "host=h password=my secret words dbname=d", "host=h password=xxxxx dbname=d"},
		{"upper-case keyword", "Password=pw Host=h", "Password=xxxxx Host=h"},
		{"value holding ://", "password=a://b host=h", "password=xxxxx host=h"},
		{"no password", "host=h user=u dbname=d", "host=h user=u dbname=d"},

		// Not DSNs.
		{"empty", "", ""},
		{"plain text", "127.0.0.1:5432", "127.0.0.1:5432"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DSN(c.dsn); got != c.want {
				t.Errorf("DSN(%q)\n got %q\nwant %q", c.dsn, got, c.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	cases := []struct {
		name, text string
		dsns       []string
		want       string
	}{
		// Secrets as parts of DSNs, wherever a message writes one.
		{"url in a message", "dial redis://:p%40ss@h:6379/0: refused", nil, "dial redis://:xxxxx@h:6379/0: refused"},
		{"quoted url", `parse "postgres://u:pw@h/db?password=a+b%26c": bad`, nil, `parse "postgres://u:xxxxx@h/db?password=xxxxx": bad`},
		{"backquoted url ends at its quote", "cannot parse `postgres://u:pw@h/db`: x", nil, "cannot parse `postgres://u:xxxxx@h/db`: x"},
		{"key=value in a message", "connect `host=h password=pw user=u`: refused", nil, "connect `host=h password=xxxxx user=u`: refused"},
		{"quoted value", `near password='it\'s here' host=h`, nil, "near password=xxxxx host=h"},
		{"user:password@host", "open cql u:pw@127.0.0.1:1: no host", nil, "open cql u:xxxxx@127.0.0.1:1: no host"},
		{"an upstream", "upstream indoubt:pw@127.0.0.1:5432 refused", nil, "upstream indoubt:xxxxx@127.0.0.1:5432 refused"},
		{"email is no user info", "mail root@example.com now", nil, "mail root@example.com now"},
		{"no secret", "dial tcp 127.0.0.1:1: connect: connection refused", nil, "dial tcp 127.0.0.1:1: connect: connection refused"},

		// The password's characters elsewhere are left alone.
		{"short password", "postgres: connect 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused",
			[]string{"postgres://u:p@127.0.0.1:1/x"}, "postgres: connect 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused"},
		{"common word", "failed to connect to `user=u database=x`: connect: connection refused",
			[]string{"host=h password=connect"}, "failed to connect to `user=u database=x`: connect: connection refused"},
		{"password in the host", "connect 127.0.0.1:1: refused", []string{"postgres://u:127@127.0.0.1:1/x"}, "connect 127.0.0.1:1: refused"},

		// The forms drivers quote the DSN they were given in.
		{"the DSN as written", "bad dsn host=h password=my secret words x", []string{"host=h password=my secret words"},
			"bad dsn host=h password=xxxxx x"},
		{"the DSN Go-quoted", `parse "cql://h:1/ks\x7f?password=s3": invalid`, []string{"cql://h:1/ks\x7f?password=s3"},
			`parse "cql://h:1/ks\x7f?password=xxxxx": invalid`},
		{"an escape in the password", `invalid password: invalid URL escape "%zz"`, []string{"mongodb://u:ab%zz@h/"},
			`invalid password: invalid URL escape "xxxxx"`},
		{"an escape in the path stays", `invalid URL escape "%zz"`, []string{"mongodb://u:pw@h/%zz"}, `invalid URL escape "%zz"`},
		{"pgx's host after a raw @", "connect c@127.0.0.1:1: lookup c@127.0.0.1: no such host", []string{"postgres://u:a:b@c@127.0.0.1:1/x"},
			"connect xxxxx@127.0.0.1:1: lookup xxxxx@127.0.0.1: no such host"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.text, c.dsns...); got != c.want {
				t.Errorf("Text(%q, %q)\n got %q\nwant %q", c.text, c.dsns, got, c.want)
			}
		})
	}
}

func TestError(t *testing.T) {
	dsn := "host=h password='s3 cret'"
	base := fmt.Errorf("connect: %w", io.ErrUnexpectedEOF)
	err := Error(fmt.Errorf("cannot parse `%s`: %w", dsn, base), dsn)
	if got, want := err.Error(), "cannot parse `host=h password=xxxxx`: connect: unexpected EOF"; got != want {
		t.Errorf("Error: got %q, want %q", got, want)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Error lost the wrapped error: errors.Is(%v, io.ErrUnexpectedEOF) is false", err)
	}
	if got := Error(base, dsn); got != base {
		t.Errorf("Error of a message without secrets: got %v (%T), want the same error", got, got)
	}
	if Error(nil, dsn) != nil {
		t.Errorf("Error(nil) is not nil")
	}
}

func TestSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"password": true, "PASSWORD": true, "sslpassword": true, "tlsCertificateKeyFilePassword": true,
		"sslPEMKeyPassword": true, "pass": true, "pwd": true, "passwd": true, "access_token": true,
		"client_secret": true, "authMechanismProperties": true, "pass%77ord": true,
		"user": false, "username": false, "authSource": false, "sslkey": false, "passfile": false,
		"tlsCertificateKeyFile": false, "sslmode": false, "host": false,
	} {
		if got := SecretKey(key); got != want {
			t.Errorf("SecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// shapes embed a password, encoded as each shape requires, in every DSN shape.
var shapes = []func(pw string) string{
	func(pw string) string { return "postgres://u:" + userinfoEscape(pw) + "@h:5432/db?sslmode=disable" },
	func(pw string) string { return "postgresql://u:" + userinfoEscape(pw) + "@h1:5432,h2:5433/db" },
	func(pw string) string { return "redis://:" + userinfoEscape(pw) + "@127.0.0.1:6379/0" },
	func(pw string) string { return "rediss://default:" + userinfoEscape(pw) + "@cache:6380" },
	func(pw string) string {
		return "mongodb://admin:" + userinfoEscape(pw) + "@m1:27017,m2:27017/?replicaSet=rs0&authSource=admin"
	},
	func(pw string) string { return "mongodb+srv://app:" + userinfoEscape(pw) + "@c.example.net/db?w=1" },
	func(pw string) string { return "cql://c:" + userinfoEscape(pw) + "@127.0.0.1:9042/ks" },
	func(pw string) string {
		return "postgres://u@h/db?password=" + url.QueryEscape(pw) + "&sslmode=disable"
	},
	func(pw string) string { return "postgres://h/db?sslpassword=" + url.QueryEscape(pw) },
	func(pw string) string {
		return "mongodb://m1/?tlsCertificateKeyFilePassword=" + url.QueryEscape(pw) + "&authSource=admin"
	},
	func(pw string) string { return "redis://h:6379/0?PASSWORD=" + url.QueryEscape(pw) },
	func(pw string) string { return "host=h user=u password='" + libpqEscape(pw) + "' dbname=d" },
	func(pw string) string { return "host=h sslpassword=" + unquotedEscape(pw) + " dbname=d" },
	func(pw string) string { return "password='" + libpqEscape(pw) + "'" },
}

// userinfoEscape is how net/url writes s as the password of a URL's user info.
func userinfoEscape(s string) string {
	return strings.TrimPrefix(url.UserPassword("", s).String(), ":")
}

func libpqEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// unquotedEscape writes pw as an unquoted libpq value: a backslash before every space,
// backslash and quote. An empty value cannot be written unquoted.
func unquotedEscape(pw string) string {
	if pw == "" {
		return "''"
	}
	var b strings.Builder
	for i := 0; i < len(pw); i++ {
		if strings.IndexByte(space+`\'`, pw[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(pw[i])
	}
	return b.String()
}

// urlShapes is how many of shapes are URLs: a URL's escaping keeps its password inside
// one token of a message, so Text finds it there even when not told the DSN.
const urlShapes = 11

// FuzzDSNHidesPassword embeds a password in every DSN shape and holds that neither the
// redacted DSN nor a scrubbed driver message that quotes the DSN depends on it: the
// password cannot be in them, nothing else in them changed, and the masking says
// nothing of it.
func FuzzDSNHidesPassword(f *testing.F) {
	for _, pw := range []string{"s3cret", "", "a b", `it's \ "x"`, "p@ss/w?rd#&=;:", "%41", "password=x", "日本語", "a&b=c",
		"p", "connect", "postgres", "127", "%", "a:b@c", "xxxxx", "u", "h"} {
		f.Add(pw)
	}
	msg := func(dsn string) string {
		return "connect " + dsn + " failed: parse " + strconv.Quote(dsn) + ": dial tcp 127.0.0.1:1: connect: connection refused (postgres, user u)"
	}
	f.Fuzz(func(t *testing.T, pw string) {
		for i, shape := range shapes {
			dsn, ref := shape(pw), shape("Q")
			if got, want := DSN(dsn), DSN(ref); got != want {
				t.Fatalf("shape %d: the redacted DSN depends on the password %q:\n dsn %q\n got %q\nwant %q", i, pw, dsn, got, want)
			}
			if got, want := Text(msg(dsn), dsn), Text(msg(ref), ref); got != want {
				t.Fatalf("shape %d: the scrubbed message depends on the password %q:\n got %q\nwant %q", i, pw, got, want)
			}
			if i < urlShapes {
				if got, want := Text(msg(dsn)), Text(msg(ref)); got != want {
					t.Fatalf("shape %d, no DSN given: the scrubbed message depends on the password %q:\n got %q\nwant %q", i, pw, got, want)
				}
			}
		}
	})
}

// FuzzDSN feeds arbitrary strings: DSN and Text never panic, DSN is idempotent, and it
// masks whatever password net/url itself finds in the user info.
func FuzzDSN(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h/db?password=x", "host=h password='a b'", "redis://:@", "a=b c", "://", "x://@@@?&;="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := DSN(s)
		if again := DSN(got); again != got {
			t.Fatalf("DSN is not idempotent on %q: %q then %q", s, got, again)
		}
		_ = Text(s, s)
		_ = Text(s)
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			return
		}
		if _, has := u.User.Password(); !has {
			return
		}
		r, err := url.Parse(got)
		if err != nil {
			return
		}
		// Masking more than the user info (a secret parameter that runs through the
		// '@') leaves none; what is left must be the mask.
		if pw, has := r.User.Password(); has && pw != Mask {
			t.Fatalf("DSN(%q) = %q: its user info %v keeps a password", s, got, r.User)
		}
	})
}
