package toxics

import "testing"

// TestKindTruthText: the fault kinds and truths print and parse by name, a value with
// no name prints as a number and does not marshal, and an unknown name is refused.
func TestKindTruthText(t *testing.T) {
	for _, k := range []Kind{CommitCut, CommitDrop} {
		b, err := k.MarshalText()
		var back Kind
		if err != nil || back.UnmarshalText(b) != nil || back != k {
			t.Errorf("%v: marshal %q %v, read back %v", k, b, err, back)
		}
	}
	for _, v := range []Truth{Applied, NotApplied} {
		b, err := v.MarshalText()
		var back Truth
		if err != nil || back.UnmarshalText(b) != nil || back != v {
			t.Errorf("%v: marshal %q %v, read back %v", v, b, err, back)
		}
	}
	if s := Kind(9).String(); s != "kind(9)" {
		t.Errorf("Kind(9) prints %q", s)
	}
	if s := Truth(0).String(); s != "truth(0)" {
		t.Errorf("Truth(0) prints %q", s)
	}
	if _, err := Kind(0).MarshalText(); err == nil {
		t.Error("the zero Kind marshals")
	}
	var k Kind
	if err := k.UnmarshalText([]byte("commit-later")); err == nil {
		t.Error("an unknown kind parses")
	}
	var tr Truth
	if err := tr.UnmarshalText([]byte("")); err == nil {
		t.Error("an empty truth parses")
	}
}
