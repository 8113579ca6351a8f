package supervise

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor contains everything the program starts without relying on process
// groups, which a program leaves at will (setsid, setpgid: a daemon): it is a child
// subreaper (PR_SET_CHILD_SUBREAPER), so that a descendant whose parent ends becomes
// the supervisor's child instead of init's, and when the program ends (or indoubt
// asks, or dies) the supervisor kills every process below it and reaps them, until none
// is left. Nothing the program started outlives it, to write into its history after
// it ended.

// becomeSubreaper makes the calling process the reaper of its orphaned descendants.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// killDescendants kills and reaps every process below this one, round after round
// (one may fork as it is killed), until it has no child left. It must run once the
// caller has reaped the children it waits for itself.
func killDescendants() {
	self := os.Getpid()
	for round := 0; ; round++ {
		below := descendants(self)
		for _, pid := range below {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		reaped := false
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.ECHILD {
				return
			}
			if pid <= 0 || err != nil {
				break
			}
			reaped = true
		}
		if len(below) == 0 && !reaped {
			// Children not yet seen in /proc, or not yet dead: look again shortly.
			time.Sleep(10 * time.Millisecond)
		}
		if round > 10000 {
			return
		}
	}
}

// descendants returns the pids of every process below pid, from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads the parent pid of process p from /proc/p/stat.
func parentOf(p int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
