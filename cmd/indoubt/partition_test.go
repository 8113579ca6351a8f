package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/servers"
)

// TestPartitionRefusedWithoutRootOrNft: a partition between nodes needs root and nft;
// without either, run refuses in one line, exit 3, before anything launches.
func TestPartitionRefusedWithoutRootOrNft(t *testing.T) {
	if args := os.Getenv("INDOUBT_TEST_PARTITION_REFUSE"); args != "" {
		os.Exit(exitCode(run(context.Background(), strings.Fields(args), os.Stdout, os.Stderr), os.Stderr))
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the refused command as another user")
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary, and an --out, that the unprivileged account reaches.
	dir := t.TempDir()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "indoubt.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cred *syscall.Credential
		env  string
		want string
	}{
		{"without root", &syscall.Credential{Uid: acct.UID, Gid: acct.GID}, "", "network namespaces need root"},
		{"without nft", nil, "INDOUBT_NFT=/nonexistent/nft", "nft not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "runs-"+strings.ReplaceAll(tc.name, " ", "-"))
			args := "run --store postgres --topology replicated --time 2s --fault partition:halves@1s-2s --out " + out
			cmd := exec.Command(bin, "-test.run=^TestPartitionRefusedWithoutRootOrNft$")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "INDOUBT_TEST_PARTITION_REFUSE="+args, "HOME=/nonexistent", "TMPDIR="+dir)
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 3 {
				t.Fatalf("exit %d (%v), want 3; stderr %q", code, err, stderr.String())
			}
			if strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q: want one line saying %q", stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), "launching") || stdout.Len() > 0 {
				t.Errorf("something ran: stdout %q", stdout.String())
			}
			if left, _ := os.ReadDir(out); len(left) != 0 {
				t.Errorf("--out holds %d entries", len(left))
			}
		})
	}
}

// TestCleanAfterKilledPartitionRun SIGKILLs `indoubt run` while a partition between
// the five nodes of a replicated Redis (three data nodes, five Sentinels) is in force,
// then runs `indoubt clean`, and expects nothing left: no namespace, no veth, no
// nftables table, no directory, no server process.
func TestCleanAfterKilledPartitionRun(t *testing.T) {
	if os.Getenv("INDOUBT_TEST_KILLED_PARTITION") != "" {
		os.Exit(exitCode(run(context.Background(), []string{"run", "--store", "redis", "--topology", "replicated",
			"--workers", "2", "--time", "60s", "--fault", "partition:isolate-primary@1s-50s", "--out", os.Getenv("INDOUBT_TEST_OUT")}, os.Stdout, os.Stderr), os.Stderr))
	}
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	parent := t.TempDir()
	for _, p := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCleanAfterKilledPartitionRun$")
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_KILLED_PARTITION=1", "INDOUBT_TEST_OUT="+filepath.Join(parent, "runs"), "TMPDIR="+parent)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	var said []string
	sc := bufio.NewScanner(errPipe)
	partitioned := false
	for sc.Scan() {
		said = append(said, sc.Text())
		if strings.Contains(sc.Text(), "partition at") {
			partitioned = true
			break
		}
	}
	if !partitioned {
		_ = cmd.Wait()
		t.Fatalf("no partition was applied; the run said %q", said)
	}
	// What the run made, to look for after the kill.
	prefix := fmt.Sprintf("%s%d-", netns.Prefix, pid)
	names, _ := filepath.Glob(filepath.Join("/run/netns", prefix+"*"))
	if len(names) != 6 {
		t.Fatalf("namespaces %v, want the hub and five nodes", names)
	}
	inodes := map[string]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if syscall.Stat(n, &st) == nil {
			inodes[fmt.Sprintf("net:[%d]", st.Ino)] = true
		}
	}
	if len(procsIn(inodes)) == 0 {
		t.Fatal("no server runs in the nodes' namespaces")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	go func() { // drain
		for sc.Scan() {
		}
	}()

	var out bytes.Buffer
	if err := run(context.Background(), []string{"clean", "--dir", parent}, &out, &out); err != nil {
		t.Fatalf("clean: %v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("gone pid %d", pid)) {
		t.Errorf("clean said %q: want the network of pid %d", out.String(), pid)
	}
	if left, _ := filepath.Glob(filepath.Join("/run/netns", prefix+"*")); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
	// A namespace's processes, its veths and its nftables go when the kernel tears it
	// down, shortly after its last reference.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		if ps := procsIn(inodes); len(ps) > 0 {
			left = append(left, fmt.Sprintf("processes %v", ps))
		}
		links, _ := netlink.LinkList()
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "idb"+strconv.Itoa(pid)+"-") {
				left = append(left, "veth "+l.Attrs().Name)
			}
		}
		if outp, err := exec.Command("nft", "list", "tables").CombinedOutput(); err != nil || bytes.Contains(outp, []byte("indoubt")) {
			left = append(left, fmt.Sprintf("nft tables %q (%v)", outp, err))
		}
		dirs, _ := filepath.Glob(filepath.Join(parent, "indoubt-*-"+strconv.Itoa(pid)+"-*"))
		if len(dirs) > 0 {
			left = append(left, fmt.Sprintf("directories %v", dirs))
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after clean: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out.Reset()
	if err := run(context.Background(), []string{"clean", "--dir", parent}, &out, &out); err != nil || !strings.Contains(out.String(), "nothing to clean") {
		t.Errorf("second clean: %v %q", err, out.String())
	}
}

// procsIn lists the processes whose network namespace is one of inodes ("net:[N]").
func procsIn(inodes map[string]bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && inodes[l] {
			out = append(out, pid)
		}
	}
	return out
}

// indoubt chaos-mesh writes the schedule's objects, and --apply refuses in one line,
// before anything is sent, when no kubeconfig names a cluster.
func TestChaosMeshCommand(t *testing.T) {
	args := []string{"chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--pod", "n2=pg-1", "--fault", "partition:isolate-primary@5s-20s", "--fault", "pause@21s-22s"}
	code, stdout, stderr := invoke(t, args...)
	if code != 0 || strings.Count(stdout, "kind: NetworkChaos") != 2 || strings.Count(stdout, "kind: PodChaos") != 1 {
		t.Errorf("exit %d, stderr %q, objects:\n%s", code, stderr, stdout)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	code, stdout, stderr = invoke(t, append(args, "--apply")...)
	if code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no kubeconfig names a cluster") || stdout != "" {
		t.Errorf("--apply without a cluster: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = invoke(t, "chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--fault", "commit-cut")
	if code != 3 || !strings.Contains(stderr, "indoubt's proxy") {
		t.Errorf("commit-cut: exit %d, stderr %q", code, stderr)
	}
}
