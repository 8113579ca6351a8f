package choice

import "testing"

type mode string

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		v       mode
		known   []mode
		want    mode
		wantErr string
	}{
		{"naive", []mode{"logged", "naive"}, "naive", ""},
		{"x", []mode{"logged", "naive"}, "", `unknown mode "x" (want logged or naive)`},
		{"", []mode{"a", "b", "c"}, "", `unknown mode "" (want a, b or c)`},
		{"a", []mode{"a"}, "a", ""},
		{"b", []mode{"a"}, "", `unknown mode "b" (want a)`},
	} {
		got, err := Parse("mode", tc.v, tc.known...)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tc.want || gotErr != tc.wantErr {
			t.Errorf("Parse(%q, %q) = %q, %q; want %q, %q", tc.v, tc.known, got, gotErr, tc.want, tc.wantErr)
		}
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		names    []mode
		list, or string
	}{
		{nil, "", ""},
		{[]mode{"a"}, "a", "a"},
		{[]mode{"a", "b"}, "a, b", "a or b"},
		{[]mode{"a", "b", "c"}, "a, b, c", "a, b or c"},
	} {
		if got := List(tc.names); got != tc.list {
			t.Errorf("List(%q) = %q, want %q", tc.names, got, tc.list)
		}
		if got := Or(tc.names); got != tc.or {
			t.Errorf("Or(%q) = %q, want %q", tc.names, got, tc.or)
		}
	}
}
