package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

// Leftover is a Network whose process is gone (killed before it could Close): its
// namespaces, the processes still running in them, and a root veth, if one outlived
// its hub.
type Leftover struct {
	// ID is the network's name, indoubt-PID-START-K; Owner the PID in it.
	ID    string
	Owner int
	// Namespaces are the names under /run/netns; Processes the pids running in them.
	Namespaces []string
	Processes  []int
	// Link is the root veth's name when it is still there.
	Link string
}

// FindLeftovers lists the Networks whose owning process is gone: its pid is not
// running, or runs a process started at another time.
func FindLeftovers() ([]Leftover, error) {
	entries, err := os.ReadDir(namedDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netns: %w", err)
	}
	byID := map[string]*Leftover{}
	for _, e := range entries {
		id, pid, ok := parseName(e.Name())
		if !ok || alive(id, pid) {
			continue
		}
		l := byID[id]
		if l == nil {
			l = &Leftover{ID: id, Owner: pid}
			byID[id] = l
		}
		l.Namespaces = append(l.Namespaces, e.Name())
		l.Processes = append(l.Processes, processesIn(filepath.Join(namedDir, e.Name()))...)
	}
	// A root veth goes with its hub; one left alone means a hub was lost another way.
	links, _ := netlink.LinkList()
	for _, lk := range links {
		name := lk.Attrs().Name
		pid, k, ok := parseLink(name)
		if !ok || pidAlive(pid) {
			continue
		}
		found := false
		for _, l := range byID {
			if l.Owner == pid && strings.HasSuffix(l.ID, "-"+k) {
				l.Link, found = name, true
			}
		}
		if !found {
			id := fmt.Sprintf("%s%d-?-%s", Prefix, pid, k)
			byID[id] = &Leftover{ID: id, Owner: pid, Link: name}
		}
	}
	var out []Leftover
	for _, l := range byID {
		sort.Strings(l.Namespaces)
		sort.Ints(l.Processes)
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// parseName reads indoubt-PID-START-K-NODE into its network's id and PID.
func parseName(name string) (id string, pid int, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", 0, false
	}
	f := strings.SplitN(rest, "-", 4)
	if len(f) != 4 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	for _, s := range f[1:3] {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return "", 0, false
		}
	}
	return Prefix + strings.Join(f[:3], "-"), pid, true
}

// parseLink reads idbPID-K.
func parseLink(name string) (pid int, k string, ok bool) {
	rest, ok := strings.CutPrefix(name, linkPrefix)
	if !ok {
		return 0, "", false
	}
	p, k, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, "", false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	if _, err := strconv.Atoi(k); err != nil {
		return 0, "", false
	}
	return pid, k, true
}

// alive reports whether the process that made network id runs: its pid with its
// start time.
func alive(id string, pid int) bool {
	f := strings.Split(strings.TrimPrefix(id, Prefix), "-")
	start, err := processStart(pid)
	return err == nil && len(f) == 3 && strconv.FormatUint(start, 10) == f[1]
}

func pidAlive(pid int) bool {
	_, err := processStart(pid)
	return err == nil
}

// processesIn lists the processes whose network namespace is the one bind-mounted at
// path.
func processesIn(path string) []int {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return nil
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + p.Name() + "/ns/net"); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out
}

// Remove kills the processes in the leftover's namespaces, waits for them to go, and
// deletes the namespaces and the root veth.
func (l Leftover) Remove() error {
	for _, pid := range l.Processes {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range l.Processes {
		for pidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var errs []error
	for _, name := range l.Namespaces {
		errs = append(errs, deleteNamed(name))
	}
	if l.Link != "" {
		if lk, err := netlink.LinkByName(l.Link); err == nil {
			// The kernel deletes a veth whose peer's namespace went: after the
			// namespaces above, it may be gone between the lookup and the delete.
			if err := netlink.LinkDel(lk); err != nil && !errors.Is(err, syscall.ENODEV) {
				errs = append(errs, fmt.Errorf("netns: delete %s: %w", l.Link, err))
			}
		}
	}
	return errors.Join(errs...)
}

// String names the leftover for `indoubt clean`.
func (l Leftover) String() string {
	s := fmt.Sprintf("network %s of gone pid %d", l.ID, l.Owner)
	if len(l.Namespaces) > 0 {
		s += fmt.Sprintf(": %d namespaces", len(l.Namespaces))
	}
	if len(l.Processes) > 0 {
		s += fmt.Sprintf(", %d processes still in them", len(l.Processes))
	}
	if l.Link != "" {
		s += ", veth " + l.Link
	}
	return s
}
