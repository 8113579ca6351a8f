package checker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestJepsenEDNGolden judges every Jepsen EDN history under testdata/jepsen-edn under
// both meanings of a failed cas, against the .verdict file beside it (one line
// "<meaning> <verdict>" per meaning); -update rewrites them.
func TestJepsenEDNGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "jepsen-edn", "*.edn"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden histories in testdata/jepsen-edn (%v)", err)
	}
	differ := 0
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".edn")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ops, err := histories.ReadJepsenEDN(f, path, histories.JepsenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			verdicts := map[Verdict]bool{}
			for _, meaning := range FailMeanings {
				res, err := Check(context.Background(), nil, ops, Options{Model: CASRegisterModel, FailMeans: meaning})
				if err != nil {
					t.Fatalf("%s: %v", meaning, err)
				}
				fmt.Fprintf(&got, "%s %s\n", meaning, res.Verdict)
				verdicts[res.Verdict] = true
			}
			if len(verdicts) > 1 {
				differ++
			}
			want := filepath.Join("testdata", "jepsen-edn", name+".verdict")
			if *update {
				if err := os.WriteFile(want, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got.String() != string(b) {
				t.Errorf("got\n%swant\n%s", got.String(), b)
			}
		})
	}
	if differ == 0 {
		t.Error("no golden EDN history is judged differently under the two meanings of a failed cas")
	}
}
