// Command plumewrite writes an rw-register history (indoubt's JSONL, or Jepsen EDN
// with -format edn) in Plume's text format, r(key,value,session,txn) and w(...) one
// micro-op a line, so that the same history can be checked by the checkers that read
// it (Plume, AWDIT) beside indoubt check. Keys and values are renumbered in the order
// they first appear; what is kept of failed and unknown transactions is said in
// histories.WritePlume.
//
// Usage: plumewrite [-format jsonl|edn] HISTORY > history.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/indoubt/indoubt/histories"
)

func main() {
	format := flag.String("format", "jsonl", "jsonl (indoubt) or edn (Jepsen)")
	flag.Parse()
	if flag.NArg() != 1 || *format != "jsonl" && *format != "edn" {
		fmt.Fprintln(os.Stderr, "usage: plumewrite [-format jsonl|edn] HISTORY > history.txt")
		os.Exit(3)
	}
	if err := run(flag.Arg(0), *format); err != nil {
		fmt.Fprintln(os.Stderr, "plumewrite:", err)
		os.Exit(3)
	}
}

func run(path, format string) error {
	var ops []histories.Op
	var err error
	if format == "jsonl" {
		_, ops, err = histories.ReadFile(path, false)
	} else {
		var f *os.File
		if f, err = os.Open(path); err != nil {
			return err
		}
		defer f.Close()
		ops, err = histories.ReadJepsenEDN(f, path, histories.JepsenOptions{})
	}
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	n, err := histories.WritePlume(w, ops)
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "plumewrite: %d committed transactions\n", n)
	return nil
}
