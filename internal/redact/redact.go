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
// Drivers echo parts of a DSN in their errors, so Text and Error scrub messages too. A
// secret is masked where it stands as a part of a DSN (the password of a URL's user
// info, the value of a password parameter, user:password@host), never wherever its
// characters happen to occur: a password "p" or "connect" must not turn "postgres" into
// "xxxxxostgres" or "connection refused" into "xxxxxion refused", and a masked message
// must not show which letters were the password. Every secret becomes the same Mask,
// whatever its length.
//
// The parsers follow what the drivers do with the same bytes (pgx's keyword=value
// scanner; net/url's "the last @ of the authority ends the user info"), so what a driver
// would send as a password is what is masked. Where a malformed DSN leaves it unclear
// which bytes are the password (an unquoted value with spaces, a raw '&' in a query
// value, a raw '@' that pgx reads as the end of the user info), more is masked rather
// than less.
package redact

import (
	"net"
	"net/url"
	"sort"
	"strconv"
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
	return scan(dsn)
}

// Text returns text with every secret written as part of a DSN masked: in each URL in
// it (scheme://...) the password of the user info and the values of secret parameters
// (SecretKey), in each key=value pair of a secret key the value, and in each
// user:password@host the password. For each dsn given, the DSN the run was asked to
// use, text is also scrubbed of the forms drivers quote that DSN in whatever it holds:
// the DSN as written and Go-quoted (net/url's `parse "..."`), net/url's `invalid URL
// escape "%zz"` when the escape is in a secret, and the host pgx reads after a raw '@'
// in a password (postgres://u:a@b@h: host "b@h"). Nothing else is touched, so a short
// or common password garbles nothing and the masking says nothing of it.
func Text(text string, dsns ...string) string {
	for _, d := range dsns {
		text = scrubKnown(text, d)
	}
	spans := textSpans(text)
	if len(spans) == 0 {
		return text
	}
	return apply(text, spans)
}

// Error returns err with its message scrubbed as Text scrubs it, or err itself when its
// message holds no secret. The result unwraps to err, so errors.Is and errors.As (the
// store error contract's classifications) still see through it.
func Error(err error, dsns ...string) error {
	if err == nil {
		return nil
	}
	return Reword(err, Text(err.Error(), dsns...))
}

// scrubKnown replaces in text the forms a driver quotes dsn in.
func scrubKnown(text, dsn string) string {
	spans := dsnSpans(dsn)
	if len(spans) == 0 {
		return text
	}
	masked := apply(dsn, spans)
	var pairs []string
	add := func(from, to string) {
		if from != "" && from != to && strings.Contains(text, from) {
			pairs = append(pairs, from, to)
		}
	}
	add(dsn, masked)
	add(quoteInner(dsn), quoteInner(masked))
	if t := strings.TrimSpace(dsn); t != dsn {
		add(t, strings.TrimSpace(masked))
	}
	for _, sp := range spans {
		for i := sp.from; i < sp.to; i++ {
			switch dsn[i] {
			case '%':
				// net/url's EscapeError quotes up to three bytes from the bad '%', of
				// the whole DSN or (a driver unescaping the password alone) of the
				// password.
				for _, end := range []int{len(dsn), sp.to} {
					frag := dsn[i:min(i+3, end)]
					add("invalid URL escape "+strconv.Quote(frag), "invalid URL escape "+strconv.Quote(Mask))
				}
			case '@':
				// pgx ends the user info at the first '@': the rest of the password
				// becomes part of the host it names in its errors.
				if host, ok := urlHost(dsn, sp.to); ok {
					add(dsn[i+1:sp.to]+"@"+host, Mask+"@"+host)
					if h, _, err := net.SplitHostPort(host); err == nil {
						add(dsn[i+1:sp.to]+"@"+h, Mask+"@"+h)
					}
				}
			}
		}
	}
	if len(pairs) == 0 {
		return text
	}
	// strings.Replacer tries the pairs in argument order at each position: the whole
	// DSN before any part of it.
	return strings.NewReplacer(pairs...).Replace(text)
}

// urlHost returns the host[:port] list that follows the user info ending at at (the
// '@' of a URL DSN).
func urlHost(dsn string, at int) (string, bool) {
	if at >= len(dsn) || dsn[at] != '@' {
		return "", false
	}
	rest := dsn[at+1:]
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest, rest != ""
}

// quoteInner is s as Go's %q writes it, without the quotes.
func quoteInner(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// textSpans finds the secrets written as parts of DSNs anywhere in text: URLs,
// key=value pairs and user:password@host.
func textSpans(text string) []span {
	var spans, urls []span
	// URLs: from each scheme to the end of its token. Inside one, only the URL's own
	// rules find secrets: a password that holds "password=" is a password.
	for off := 0; ; {
		i := strings.Index(text[off:], "://")
		if i < 0 {
			break
		}
		i += off
		from := i
		for from > 0 && isSchemeByte(text[from-1]) {
			from--
		}
		end := tokenEnd(text, i+3, from)
		if from < i && isLetter(text[from]) {
			urls = append(urls, span{from, end})
			tok := text[from:end]
			ss := scanURL(tok, i-from+3)
			for _, sp := range ss {
				spans = append(spans, span{from + sp.from, from + sp.to})
			}
		}
		off = max(i+3, end)
	}
	inURL := func(i int) bool {
		for _, u := range urls {
			if u.from <= i && i < u.to {
				return true
			}
		}
		return false
	}
	spans = append(spans, pairSpans(text, inURL)...)
	spans = append(spans, userinfoSpans(text)...)
	return spans
}

// tokenEnd returns where a token that begins at start ends: at white space, or at the
// quote or bracket that closes the one just before the token (at open-1).
func tokenEnd(text string, start, open int) int {
	closer := byte(0)
	if open > 0 {
		switch c := text[open-1]; c {
		case '"', '\'', '`':
			closer = c
		case '(':
			closer = ')'
		case '[':
			closer = ']'
		case '<':
			closer = '>'
		case '{':
			closer = '}'
		}
	}
	for i := start; i < len(text); i++ {
		c := text[i]
		if strings.IndexByte(space, c) >= 0 || closer != 0 && c == closer {
			return i
		}
	}
	return len(text)
}

// pairSpans finds the values of secret keys written key=value outside URLs (skip), in
// single or double quotes (to the closing quote, a backslash escaping one byte) or bare
// (to white space, a quote, a bracket, ',', ';' or '&'). A quote with no closing one
// after it closes whatever the pair was quoted in: the value is empty.
func pairSpans(text string, skip func(int) bool) []span {
	var spans []span
	for off := 0; off < len(text); {
		eq := strings.IndexByte(text[off:], '=')
		if eq < 0 {
			break
		}
		eq += off
		off = eq + 1
		k := eq
		for k > 0 && isKeyByte(text[k-1]) {
			k--
		}
		if k == eq || skip(k) || !SecretKey(text[k:eq]) {
			continue
		}
		from := eq + 1
		to := from
		if from < len(text) && (text[from] == '\'' || text[from] == '"') {
			q := text[from]
			to = from + 1
			for to < len(text) && text[to] != q {
				if text[to] == '\\' {
					to++
				}
				to++
			}
			if to >= len(text) {
				continue
			}
			to++
		} else {
			for to < len(text) && strings.IndexByte(space+"\"'`)]}>,;&", text[to]) < 0 {
				if text[to] == '\\' {
					to++
				}
				to++
			}
			to = min(to, len(text))
		}
		if to > from {
			spans = append(spans, span{from, to})
			off = to
		}
	}
	return spans
}

// userinfoSpans finds user:password@host written without a scheme (an address a driver
// took a DSN's user info into, a proxy's upstream): in each token holding an '@'
// followed by a host, the text from the first ':' to the last '@'.
func userinfoSpans(text string) []span {
	var spans []span
	for i := 0; i < len(text); {
		for i < len(text) && isTokenSep(text[i]) {
			i++
		}
		j := i
		for j < len(text) && !isTokenSep(text[j]) {
			j++
		}
		tok := text[i:j]
		if at := strings.LastIndexByte(tok, '@'); at > 0 && at+1 < len(tok) && (isLetter(tok[at+1]) || isDigit(tok[at+1]) || tok[at+1] == '[') &&
			!strings.Contains(tok, "://") {
			if colon := strings.IndexByte(tok[:at], ':'); colon >= 0 {
				spans = append(spans, span{i + colon + 1, i + at})
			}
		}
		i = j
	}
	return spans
}

func isTokenSep(c byte) bool { return strings.IndexByte(space+"\"'`()[]<>{},;", c) >= 0 }

func isSchemeByte(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '+' || c == '-' || c == '.'
}

func isKeyByte(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '%'
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

// scan returns s with its secret spans masked.
func scan(s string) string {
	spans := dsnSpans(s)
	if len(spans) == 0 {
		return s
	}
	return apply(s, spans)
}

// dsnSpans finds the secret spans of the DSN s.
func dsnSpans(s string) []span {
	if start, ok := urlStart(s); ok {
		return scanURL(s, start)
	}
	if strings.IndexByte(s, '=') >= 0 {
		return scanKeywordValue(s)
	}
	return nil
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
func scanURL(s string, start int) []span {
	var spans []span
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
			spans = append(spans, span{start + colon + 1, start + at})
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
		i = to - 1
	}
	return spans
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
func scanKeywordValue(s string) []span {
	var spans []span
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
			next = to
		}
		if SecretKey(key) {
			// Text glued to a closing quote, and words after the value that
			// cannot be keywords (no '='), are taken as the rest of a password
			// written with spaces and no (or misplaced) quotes.
			for to < len(s) && strings.IndexByte(space, s[to]) < 0 {
				to++
			}
			to = absorbWords(s, to)
			next = to
			spans = append(spans, span{from, to})
		}
		i = skipSpace(s, next)
	}
	return spans
}

// absorbWords extends a value ending at to over the following words that hold no '='.
func absorbWords(s string, to int) int {
	for {
		w := skipSpace(s, to)
		if w >= len(s) {
			return to
		}
		end := w
		for end < len(s) && strings.IndexByte(space, s[end]) < 0 {
			end++
		}
		if strings.IndexByte(s[w:end], '=') >= 0 {
			return to
		}
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

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
