package indoubttest

import "testing"

func TestCutMatch(t *testing.T) {
	for _, c := range []struct{ spec, rest, expr string }{
		{"commit-cut:0.2", "commit-cut:0.2", ""},
		{"commit-cut:0.2,match=INSERT INTO orders", "commit-cut:0.2", "INSERT INTO orders"},
		{"commit-cut:1,max=2,match=INSERT INTO orders@1s-3s", "commit-cut:1,max=2@1s-3s", "INSERT INTO orders"},
		{"commit-drop:match=(?i)update a, b@500ms-", "commit-drop@500ms-", "(?i)update a, b"},
		{"commit-mixed:0.1,match=a@b", "commit-mixed:0.1", "a@b"},
	} {
		rest, expr, ok := cutMatch(c.spec)
		if rest != c.rest || expr != c.expr || ok != (c.expr != "") {
			t.Errorf("cutMatch(%q) = %q, %q, %v; want %q, %q", c.spec, rest, expr, ok, c.rest, c.expr)
		}
	}
}
