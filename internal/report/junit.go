package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"time"
)

// JUnitCase is one case of a suite as a JUnit testcase: its outcome and what a CI page
// shows of it.
type JUnitCase struct {
	Name string
	// Time is how long the case took.
	Time time.Duration
	// Failure is the failure message (the verdict's first explanation, or why the
	// expectation did not hold); empty when the case passed or was skipped.
	Failure string
	// Detail is the failure's body: every expectation that did not hold.
	Detail string
	// Skipped is why the case did not run; empty when it ran.
	Skipped string
	// Out is the testcase's system-out: the run directory and the verdict line.
	Out string
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Failure   *junitMessage `xml:"failure"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes a suite's cases as a JUnit XML report, the shape CI systems read
// (Jenkins' junit-10.xsd): one testsuites element holding one testsuite named suite,
// one testcase per case, a failure element with the message for each failed case and a
// skipped element for each case that could not run here.
func WriteJUnit(w io.Writer, suite string, started time.Time, cases []JUnitCase) error {
	s := junitSuite{Name: suite, Timestamp: started.UTC().Format("2006-01-02T15:04:05")}
	var total time.Duration
	for _, c := range cases {
		jc := junitCase{Name: c.Name, Classname: "indoubt." + suite, Time: seconds(c.Time), SystemOut: c.Out}
		switch {
		case c.Skipped != "":
			jc.Skipped = &junitMessage{Message: c.Skipped}
			s.Skipped++
		case c.Failure != "":
			jc.Failure = &junitMessage{Message: c.Failure, Type: "expectation", Body: c.Detail}
			s.Failures++
		}
		s.Cases = append(s.Cases, jc)
		total += c.Time
	}
	s.Tests, s.Time = len(cases), seconds(total)
	doc := junitSuites{Name: suite, Tests: s.Tests, Failures: s.Failures, Time: s.Time, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
