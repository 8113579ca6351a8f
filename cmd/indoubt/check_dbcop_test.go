package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCheckDBCopElleJSON runs indoubt check --format dbcop and --format elle-json on
// golden histories written in each format, at the axiomatic and Elle levels: a valid
// history passes; a fractured read passes read committed and fails read atomic and
// causal, and (no session order in it) serializable, snapshot isolation and repeatable
// read; an aborted read fails read committed, axiomatic and Elle's; a malformed file
// is refused with one line naming its position, exit 3.
func TestCheckDBCopElleJSON(t *testing.T) {
	const dir = "../../histories/testdata/"
	dbcop := func(models, file string) []string {
		return []string{"--format", "dbcop", "--consistency-models", models, dir + "dbcop/" + file}
	}
	elle := func(model, models, file string) []string {
		return []string{"--format", "elle-json", "--model", model, "--consistency-models", models, dir + "elle-json/" + file}
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"dbcop valid causal", dbcop("causal", "valid.json"), 0, "valid (rw-register)"},
		{"dbcop valid serializable", dbcop("serializable", "valid.json"), 0, "valid (rw-register)"},
		{"dbcop fractured rc", dbcop("axiomatic-read-committed", "fractured.json"), 0, "valid (rw-register)"},
		{"dbcop fractured ra", dbcop("read-atomic", "fractured.json"), 1, "read-atomic-cycle"},
		{"dbcop fractured causal", dbcop("causal", "fractured.json"), 1, "violates axiomatic-read-atomic"},
		// Each transaction a session of its own: Adya's levels fail it too.
		{"dbcop fractured serializable", dbcop("serializable", "fractured.json"), 1, "sessionless-read-atomic-cycle"},
		{"dbcop fractured si", dbcop("snapshot-isolation", "fractured.json"), 1, "sessionless-read-atomic-cycle"},
		{"dbcop fractured rr", dbcop("repeatable-read", "fractured.json"), 1, "sessionless-read-atomic-cycle"},
		{"dbcop aborted read axiomatic", dbcop("axiomatic-read-committed", "aborted-read.json"), 1, "G1a: transaction 1 read key 0 = 1"},
		{"dbcop aborted read elle", dbcop("read-committed", "aborted-read.json"), 1, "G1a"},
		{"dbcop malformed", dbcop("causal", "bad-value.json"), 3, ""},
		{"elle valid", elle("list-append", "serializable", "list-append-valid.json"), 0, "valid (list-append)"},
		{"elle valid axiomatic", elle("list-append", "axiomatic-read-committed", "list-append-valid.json"), 0, "valid (list-append)"},
		{"elle aborted read", elle("list-append", "read-committed", "list-append-aborted-read.json"), 1, "G1a"},
		{"elle aborted read axiomatic", elle("list-append", "axiomatic-read-committed", "list-append-aborted-read.json"), 1, "violates axiomatic-read-committed"},
		{"elle fractured rc", elle("rw-register", "axiomatic-read-committed", "rw-register-fractured.json"), 0, "valid (rw-register)"},
		{"elle fractured ra", elle("rw-register", "read-atomic", "rw-register-fractured.json"), 1, "read-atomic-cycle"},
		{"elle malformed", elle("list-append", "serializable", "bad-order.json"), 3, ""},
		{"elle skips no op", []string{"--format", "elle-json", "--model", "list-append", "--skip-bad-lines", dir + "elle-json/bad-order.json"}, 3, ""},
		{"elle needs a model", []string{"--format", "elle-json", dir + "elle-json/list-append-valid.json"}, 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"check"}, c.args...), &out, &errb)
			if code := exitCode(err, &errb); code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out.String())
			}
			if c.code == 3 {
				if line := strings.TrimSpace(errb.String()); line == "" || strings.Contains(line, "\n") {
					t.Errorf("want one line on stderr, got %q", errb.String())
				}
			}
		})
	}
	// The malformed files' errors name the file and the position.
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"check"}, dbcop("causal", "bad-value.json")...), &out, &errb)
	exitCode(err, &errb)
	if !strings.Contains(errb.String(), "bad-value.json:3:4: session 1, transaction 0") {
		t.Errorf("dbcop error: %q", errb.String())
	}
	errb.Reset()
	err = run(context.Background(), append([]string{"check"}, elle("list-append", "serializable", "bad-order.json")...), &out, &errb)
	exitCode(err, &errb)
	if !strings.Contains(errb.String(), "bad-order.json:2:2: process 0 invokes while its operation invoked at ") {
		t.Errorf("elle-json error: %q", errb.String())
	}
}
