package schedule

import (
	"reflect"
	"testing"
	"time"
)

// Actions orders the window edges by time, a close before an open at one instant,
// and leaves out what keep refuses.
func TestActions(t *testing.T) {
	s, err := Parse([]string{"latency:50ms@2s-3s", "commit-cut@1s-2s", "commit-drop@1s-", "kill@0s-1s"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Action{{At: 0, I: 3, Open: true}, {At: time.Second, I: 3}, {At: time.Second, I: 1, Open: true},
		{At: time.Second, I: 2, Open: true}, {At: 2 * time.Second, I: 1}, {At: 2 * time.Second, I: 0, Open: true},
		{At: 3 * time.Second, I: 0}}
	if got := s.Actions(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("Actions(nil) = %+v\nwant %+v", got, want)
	}
	want = []Action{{At: time.Second, I: 1, Open: true}, {At: time.Second, I: 2, Open: true}, {At: 2 * time.Second, I: 1},
		{At: 2 * time.Second, I: 0, Open: true}, {At: 3 * time.Second, I: 0}}
	if got := s.Actions(func(f Fault) bool { return !f.Process }); !reflect.DeepEqual(got, want) {
		t.Errorf("Actions(not process) = %+v\nwant %+v", got, want)
	}
}
