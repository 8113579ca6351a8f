package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadResultsRefusesWhatJSONReadsSilently: a results.json whose key is given twice
// (encoding/json keeps the last: a second "verdict" would override the first) or that
// is not UTF-8 is refused, where a well-formed one is read.
func TestReadResultsRefusesWhatJSONReadsSilently(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "shrink", "testdata", "naive-cut", ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"well-formed", good, ""},
		{"verdict twice", []byte(strings.Replace(string(good), `"verdict":`, `"verdict": "valid", "verdict":`, 1)), `key "verdict" twice`},
		{"nested key twice", []byte(strings.Replace(string(good), `"phases_s": {`, `"phases_s": {"setup": 1,`, 1)), `key "setup" twice`},
		{"not UTF-8", []byte(strings.Replace(string(good), `"summary": "`, "\"summary\": \"\xff", 1)), "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ResultsFile), tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadResults(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
