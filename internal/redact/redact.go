// Package redact hides the secrets of connection strings (DSNs) before they are written
// to a run directory, printed or returned in an error.
//
// One function, DSN, handles every shape the stores accept:
//
//	postgres://user:PW@host:5432,host2:5433/db?sslpassword=PW   URL user info, multi-host
//	redis://:PW@host:6379/0   rediss://user:PW@host              Redis
//	mongodb://user:PW@h1,h2/?tlsCertificateKeyFilePassword=PW    MongoDB, mongodb+srv
//	cql://user:PW@host:9042/keyspace?password=PW                 CQL (and any other scheme)
//	host=h user=u password='a \'quoted\' value' sslpassword=PW    libpq keyword=value
//
// Drivers echo parts of a DSN in their errors, so Secrets extracts what DSN masks and
// Text and Error scrub those secrets, in each of their encoded forms, from any text.
//
// The parsers follow what the drivers do with the same bytes (pgx's keyword=value
// scanner; net/url's "the last @ of the authority ends the user info"), so what a driver
// would send as a password is what is masked. Where a malformed DSN leaves it unclear
// which bytes are the password (an unquoted value with spaces, a raw '&' in a query
// value), more is masked rather than less.
package redact

import (
	"net/url"
	"sort"
	"strings"
)

// Mask replaces every secret: the same text whatever the secret's length, so that the
// redacted form says nothing about it. It is what net/url's URL.Redacted writes.
const Mask = "xxxxx"

// DSN returns dsn with every password and other secret masked: the password of a URL's
// user info, query parameters that carry secrets (password, pass, pwd, sslpassword,
// tlsCertificateKeyFilePassword, tokens; keys compared case-insensitively after
// percent-decoding) and the same keys in a libpq keyword=value string. Host names,
// user names, ports, paths and file names (sslkey, tlsCertificateKeyFile) stay: they
// are what a reader needs to know where a run connected. A string that is neither a
// URL nor has an '=' is returned unchanged. DSN never fails and never panics.
func DSN(dsn string) string {
	out, _ := scan(dsn)
	return out
}

// Secrets returns the secrets DSN masks in dsn, each as written and decoded (percent
// escapes, libpq quotes and backslashes undone), longest first; nil when there are none.
// Pass them to Text to scrub a driver's error message that quotes part of the DSN.
func Secrets(dsn string) []string {
	_, secrets := scan(dsn)
	return uniqueLongestFirst(secrets)
}

// Text returns text with every occurrence of each non-empty secret replaced by Mask,
// also in the encoded forms a DSN or an error message may carry it in (URL user info,
// path and query escaping, libpq backslash escaping). Longer secrets are replaced first,
// so a secret that contains another is masked whole.
func Text(text string, secrets ...string) string {
	var forms []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), userinfoEscape(s), libpqEscape(s))
	}
	forms = uniqueLongestFirst(forms)
	if len(forms) == 0 {
		return text
	}
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Mask)
	}
	// strings.Replacer tries the pairs in argument order at each position, so the
	// longest form wins where forms overlap.
	return strings.NewReplacer(pairs...).Replace(text)
}

// Error returns err with the secrets of dsn scrubbed from its message (Text over
// Secrets(dsn)), or err itself when its message holds none. The result unwraps to err,
// so errors.Is and errors.As (the store error contract's classifications) still see
// through it.
func Error(err error, dsn string) error {
	if err == nil {
		return nil
	}
	return Reword(err, Text(err.Error(), Secrets(dsn)...))
}

// Reword returns err with the message msg, or err itself when msg is already its
// message. The result unwraps to err, so errors.Is and errors.As see through it.
func Reword(err error, msg string) error {
	if msg == err.Error() {
		return err
	}
	return &reworded{msg: msg, err: err}
}

type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// span is a half-open byte range of the input to mask.
type span struct{ from, to int }

// scan finds the secret spans of s and returns s with them masked, and the secrets.
func scan(s string) (string, []string) {
	var spans []span
	var secrets []string
	if start, ok := urlStart(s); ok {
		spans, secrets = scanURL(s, start)
	} else if strings.IndexByte(s, '=') >= 0 {
		spans, secrets = scanKeywordValue(s)
	}
	if len(spans) == 0 {
		return s, nil
	}
	return apply(s, spans), secrets
}

// apply masks spans of s; spans may overlap and come in any order.
func apply(s string, spans []span) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		b.WriteString(s[at:from])
		b.WriteString(Mask)
		at = to
	}
	b.WriteString(s[at:])
	return b.String()
}

// urlStart reports whether s is a URL (a scheme, then "://", after optional leading
// space; or a scheme-relative "//", which net/url also reads as user info and host) and
// where its authority begins.
func urlStart(s string) (int, bool) {
	if t := strings.TrimLeft(s, space); strings.HasPrefix(t, "//") {
		return len(s) - len(t) + 2, true
	}
	i := strings.Index(s, "://")
	if i < 0 {
		return 0, false
	}
	scheme := strings.TrimLeft(s[:i], " \t\n\r\v\f")
	if scheme == "" || !isLetter(scheme[0]) {
		return 0, false
	}
	for j := 1; j < len(scheme); j++ {
		c := scheme[j]
		if !isLetter(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return 0, false
		}
	}
	return i + 3, true
}

// scanURL finds the password of the user info and the secret query parameters of the
// URL whose authority begins at start.
func scanURL(s string, start int) ([]span, []string) {
	var spans []span
	var secrets []string
	rest := s[start:]
	// The user info ends at the last '@' before the first '/', '?' or '#' that follows
	// an '@': net/url's rule, which also lets a raw '/' or '?' in a password stay inside
	// the user info instead of being read as a path or query.
	if first := strings.IndexByte(rest, '@'); first >= 0 {
		end := len(rest)
		if k := strings.IndexAny(rest[first+1:], "/?#"); k >= 0 {
			end = first + 1 + k
		}
		at := strings.LastIndexByte(rest[:end], '@')
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			raw := rest[colon+1 : at]
			spans = append(spans, span{start + colon + 1, start + at})
			secrets = appendDecoded(secrets, raw, url.PathUnescape)
		}
	}
	// Query parameters: every key=value that follows '?', '&' or ';' anywhere after the
	// scheme, not only after the first '?': a raw '?' in a password or an '@' in a
	// value must not hide a parameter. MongoDB also accepts ';' between options.
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c != '?' && c != '&' && c != ';' {
			continue
		}
		keyEnd := strings.IndexAny(rest[i+1:], "=?&;#")
		if keyEnd < 0 || rest[i+1+keyEnd] != '=' {
			continue
		}
		key := rest[i+1 : i+1+keyEnd]
		if !SecretKey(key) {
			continue
		}
		from := i + 1 + keyEnd + 1
		to := queryValueEnd(rest, from)
		spans = append(spans, span{start + from, start + to})
		secrets = appendDecoded(secrets, rest[from:to], url.QueryUnescape)
		i = to - 1
	}
	return spans, secrets
}

// queryValueEnd returns where the query value starting at from ends: at an '&' or ';'
// that begins another key=value. A following segment without '=' cannot be a
// parameter of its own, so it is taken as part of a password written with a raw '&'.
func queryValueEnd(s string, from int) int {
	i := from
	for {
		k := strings.IndexAny(s[i:], "&;")
		if k < 0 {
			return len(s)
		}
		next := i + k
		seg := s[next+1:]
		if j := strings.IndexAny(seg, "&;"); j >= 0 {
			seg = seg[:j]
		}
		if strings.IndexByte(seg, '=') >= 0 {
			return next
		}
		i = next + 1
	}
}

const space = " \t\n\r\v\f"

// scanKeywordValue finds secret values in a libpq keyword=value string, read as pgx
// reads it: a keyword, '=', optional space, then a value either in single quotes or
// up to the next space, with backslash escaping one character in both.
func scanKeywordValue(s string) ([]span, []string) {
	var spans []span
	var secrets []string
	i := skipSpace(s, 0)
	for i < len(s) {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			break
		}
		keyText := strings.TrimRight(s[i:i+eq], space)
		// pgx refuses a keyword with space in it; its last word is the keyword the
		// writer meant, and the words before it were left over from a value.
		key := keyText
		if k := strings.LastIndexAny(keyText, space); k >= 0 {
			key = keyText[k+1:]
		}
		from := skipSpace(s, i+eq+1)
		var to, next int
		var val string
		quoted := from < len(s) && s[from] == '\''
		if quoted {
			end := from + 1
			for end < len(s) && s[end] != '\'' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			end = min(end, len(s))
			val = unescapeLibpq(s[from+1 : end])
			to = min(end+1, len(s)) // the closing quote, when there is one
			next = to
		} else {
			end := from
			for end < len(s) && strings.IndexByte(space, s[end]) < 0 {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			to = min(end, len(s))
			val = unescapeLibpq(s[from:to])
			next = to
		}
		if SecretKey(key) {
			// Text glued to a closing quote, and words after the value that
			// cannot be keywords (no '='), are taken as the rest of a password
			// written with spaces and no (or misplaced) quotes.
			for to < len(s) && strings.IndexByte(space, s[to]) < 0 {
				to++
			}
			var raw string
			to, raw = absorbWords(s, from, to, &secrets)
			next = to
			spans = append(spans, span{from, to})
			secrets = append(secrets, raw, val)
		}
		i = skipSpace(s, next)
	}
	return spans, secrets
}

// absorbWords extends the value s[from:to] over the following words that hold
// no '=', adding each word to secrets (a driver's error may quote one alone).
func absorbWords(s string, from, to int, secrets *[]string) (int, string) {
	for {
		w := skipSpace(s, to)
		if w >= len(s) {
			return to, s[from:to]
		}
		end := w
		for end < len(s) && strings.IndexByte(space, s[end]) < 0 {
			end++
		}
		word := s[w:end]
		if strings.IndexByte(word, '=') >= 0 {
			return to, s[from:to]
		}
		*secrets = append(*secrets, word)
		to = end
	}
}

// SecretKey reports whether a DSN parameter named key carries a secret: password,
// pass, passwd, pwd, any key holding "password", "secret" or "token", API keys, and
// MongoDB's authMechanismProperties (it can carry an AWS session token). The key is
// compared case-insensitively after percent-decoding, as drivers decode it. Keys naming
// a file (sslkey, passfile, tlsCertificateKeyFile) are not secrets: the path says
// where a key is, not what it is.
func SecretKey(key string) bool {
	if d, err := url.QueryUnescape(key); err == nil {
		key = d
	}
	k := strings.ToLower(strings.TrimSpace(key))
	switch k {
	case "pass", "passwd", "pwd", "apikey", "api_key", "authmechanismproperties":
		return true
	}
	for _, part := range []string{"password", "secret", "token"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(space, s[i]) >= 0 {
		i++
	}
	return i
}

// unescapeLibpq undoes libpq's backslash escaping: a backslash keeps the next byte.
func unescapeLibpq(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func libpqEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// userinfoEscape is how net/url writes s as the password of a URL's user info.
func userinfoEscape(s string) string {
	u := url.UserPassword("", s).String()
	return strings.TrimPrefix(u, ":")
}

func appendDecoded(secrets []string, raw string, decode func(string) (string, error)) []string {
	secrets = append(secrets, raw)
	if d, err := decode(raw); err == nil && d != raw {
		secrets = append(secrets, d)
	}
	return secrets
}

func uniqueLongestFirst(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
