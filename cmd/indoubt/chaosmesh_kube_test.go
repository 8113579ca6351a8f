package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// kubeVersion is the release scripts/prepare-kube builds by default.
const kubeVersion = "1.36.3"

// kubeBinaries returns kube-apiserver and kubectl from the cache scripts/prepare-kube
// fills (kubectl from PATH when the cache has none), skipping the test when they are
// not prepared: the build takes minutes, and scripts/test makes it only with
// INDOUBT_KUBE=1, under which a missing one fails the test.
func kubeBinaries(t *testing.T) (apiserver, kubectl string) {
	t.Helper()
	missing := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("INDOUBT_KUBE") == "1" {
			t.Fatalf(format+" (INDOUBT_KUBE=1)", a...)
		}
		t.Skipf(format, a...)
	}
	cache, err := servers.CacheDir()
	if err != nil {
		missing("no cache: %v", err)
	}
	version := strings.TrimPrefix(cmp.Or(os.Getenv("INDOUBT_KUBE_VERSION"), kubeVersion), "v")
	dir := filepath.Join(cache, "kube-"+version)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		missing("kube-apiserver %s is not prepared in %s: scripts/prepare-kube builds it (about 15-30 minutes)", version, dir)
	}
	apiserver = filepath.Join(dir, "bin", "kube-apiserver")
	kubectl = filepath.Join(dir, "bin", "kubectl")
	if !servers.IsExecutable(kubectl) {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			missing("no kubectl in %s nor on PATH", dir)
		}
	}
	return apiserver, kubectl
}

// kubeAPI is a kube-apiserver the test launched, on loopback, with an etcd of its own.
type kubeAPI struct {
	kubectl, kubeconfig string
}

// startKube launches a one-member etcd and a kube-apiserver on it (serving
// certificates it makes itself, a service-account key pair, one token in
// system:masters, RBAC), waits for /readyz, and writes a kubeconfig naming it. Both
// end with the test; the API server also with the test's process (SIGKILL on the
// parent's death), etcd as its launcher provides.
func startKube(t *testing.T) *kubeAPI {
	t.Helper()
	apiserver, kubectl := kubeBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ec, err := etcd.Start(ctx, etcd.Options{Members: 1})
	if err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	t.Cleanup(func() { ec.Stop() })

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saKey := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	saPub := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	tok := make([]byte, 16)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	tokens := write("tokens.csv", []byte(token+`,indoubt,indoubt,"system:masters"`+"\n"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	logf, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(apiserver,
		"--etcd-servers=http://"+ec.Endpoints[0], "--etcd-prefix=/indoubt-"+token[:8],
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir="+filepath.Join(dir, "certs"), "--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey, "--token-auth-file="+tokens, "--authorization-mode=RBAC")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	tail := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		return string(b)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// Its serving certificate is one it made itself at start.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("kube-apiserver exited: %v\n%s", err, tail())
		case <-ctx.Done():
			t.Fatalf("kube-apiserver not ready after 2 minutes\n%s", tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("kube-apiserver %s ready in %.1fs on etcd %s", kubeVersion, time.Since(started).Seconds(), ec.Version)
	kc := write("kubeconfig", []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: indoubt
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: indoubt
  user:
    token: %s
contexts:
- name: indoubt
  context:
    cluster: indoubt
    user: indoubt
current-context: indoubt
`, url, token)))
	return &kubeAPI{kubectl: kubectl, kubeconfig: kc}
}

// run runs kubectl on the API server with stdin, returning its output and error.
func (k *kubeAPI) run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func (k *kubeAPI) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errs, err := k.run(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, errs)
	}
	return out
}

// Every object indoubt chaos-mesh writes, for each topology and every fault it takes,
// is accepted by a real kube-apiserver with Chaos Mesh's published CRDs (server-side
// dry run); a wrong action, mode or field is refused naming the field; and --apply
// creates the objects in a namespace at their start and deletes them after their
// window. Runs when scripts/prepare-kube has built kube-apiserver.
func TestChaosMeshOnKubeAPIServer(t *testing.T) {
	crds := filepath.Join("..", "..", "..", "shared", "crds", "chaos-mesh")
	var files []string
	for _, kind := range []string{"networkchaos", "podchaos"} {
		files = append(files, "-f", filepath.Join(crds, "chaos-mesh.org_"+kind+".yaml"))
	}
	if _, err := os.Stat(files[1]); err != nil {
		t.Skipf("Chaos Mesh's CRDs are not here (%s)", crds)
	}
	k := startKube(t)
	k.must(t, "", append([]string{"apply", "--server-side"}, files...)...)
	k.must(t, "", "wait", "--for=condition=Established", "--timeout=90s", "crd/networkchaos.chaos-mesh.org", "crd/podchaos.chaos-mesh.org")
	const ns = "indoubt-chaos"
	k.must(t, "", "create", "namespace", ns)

	five := []string{"--namespace", ns, "--pod", "n1=redis-0", "--pod", "n2=redis-1", "--pod", "n3=redis-2", "--pod", "n4=sentinel-3", "--pod", "n5=sentinel-4"}
	three := []string{"--namespace", ns, "--pod", "n1=pg-0", "--pod", "n2=pg-1", "--pod", "n3=pg-2"}
	labels := []string{"--leader-label", "role=master", "--cluster-label", "cluster-name=pg"}
	faultArgs := func(specs ...string) []string {
		var a []string
		for _, s := range specs {
			a = append(a, "--fault", s)
		}
		return a
	}
	schedules := map[string][]string{
		"primary": append(five, faultArgs("partition:majority@1s-5s", "partition:halves@5s-6s", "partition:majorities-ring@6s-7s",
			"partition:bridge@7s-8s", "partition:isolate:n2@8s-9s", "partition:one-way@9s-10s", "partition:isolate-primary@10s-11s",
			"latency:200ms~20ms,link=replication@12s-13s", "bandwidth:100,link=replication@13s-14s", "kill@15s-16s", "pause@17s-18s", "failover@19s")...),
		"etcd": append(append(append(three, "--topology", "etcd"), labels...), faultArgs("partition:isolate-primary@1s-5s",
			"kill@6s-7s", "pause@8s-9s", "partition:one-way@10s-11s", "partition:one-way:n3@11s-12s", "partition:halves@12s-13s", "partition:isolate:n2@13s-14s")...),
		"patroni": append(append(append(three, "--topology", "patroni", "--dcs-pod", "etcd-0", "--dcs-pod", "etcd-1", "--dcs-pod", "etcd-2"), labels...),
			faultArgs("partition:isolate-primary@1s-5s", "partition:dcs@6s-10s", "partition:dcs:n2@11s-12s", "kill@13s-14s", "pause@15s-16s")...),
	}
	written := map[string]string{}
	for name, args := range schedules {
		code, out, errs := invoke(t, append([]string{"chaos-mesh"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		written[name] = out
		n := strings.Count(out, "---\n")
		got, errs, err := k.run(t, out, "create", "--dry-run=server", "-o", "name", "-f", "-")
		if err != nil {
			t.Errorf("%s: the API server refused what indoubt wrote: %v\n%s", name, err, errs)
			continue
		}
		if lines := strings.Count(got, "\n"); lines != n {
			t.Errorf("%s: %d objects written, %d accepted:\n%s", name, n, lines, got)
		}
		t.Logf("%s: %d objects accepted (server-side dry run)", name, n)
	}

	// Wrong ones, refused by the API server with their field.
	one := written["etcd"]
	one = one[:strings.Index(one[4:], "---\n")+4]
	for _, tc := range []struct{ from, to, field string }{
		{"action: partition", "action: sever", `spec.action: Unsupported value: "sever"`},
		{"mode: all\n", "mode: every\n", `spec.mode: Unsupported value: "every"`},
		{"direction: from", "direction: sideways", `spec.direction: Unsupported value: "sideways"`},
		{"action: partition", "actoin: partition", `unknown field "spec.actoin"`},
	} {
		bad := strings.Replace(one, tc.from, tc.to, 1)
		if bad == one {
			t.Fatalf("%q is not in the object:\n%s", tc.from, one)
		}
		_, errs, err := k.run(t, bad, "create", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(errs, tc.field) {
			t.Errorf("%s: accepted, or refused without naming the field (%v): %s", tc.to, err, errs)
		} else {
			t.Logf("refused: %s", strings.TrimSpace(errs))
		}
	}

	// --apply: each object created at its start and deleted after its window.
	t.Setenv("KUBECONFIG", k.kubeconfig)
	t.Setenv("PATH", filepath.Dir(k.kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	args := append(append(append([]string{"chaos-mesh"}, three...), "--topology", "patroni", "--dcs-pod", "etcd-0", "--apply"), labels...)
	args = append(args, faultArgs("partition:isolate-primary@0s-4s", "kill@1s-4s", "partition:dcs@5s-6s")...)
	// What the namespace holds is seen by a watch of each kind (an object that lives
	// under a second is seen however slow kubectl is on a loaded machine), and by
	// listing it while --apply runs (before a watch is established).
	var mu sync.Mutex
	seen := map[string]bool{}
	note := func(out string) {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range strings.Fields(out) {
			seen[o] = true
		}
	}
	var watches []*exec.Cmd
	for _, kind := range []string{"networkchaos", "podchaos"} {
		w := exec.Command(k.kubectl, "--kubeconfig", k.kubeconfig, "get", kind, "-n", ns, "-o", "name", "--watch")
		pipe, err := w.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
		go func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				note(sc.Text())
			}
		}()
	}
	stopWatches := func() {
		for _, w := range watches {
			w.Process.Kill()
			w.Wait()
		}
	}
	defer stopWatches()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		var stdout bytes.Buffer
		done <- exitCode(run(context.Background(), args, &stdout, &stderr), &stderr)
	}()
	want := []string{"networkchaos.chaos-mesh.org/indoubt-0-partition-leader", "networkchaos.chaos-mesh.org/indoubt-0-partition-others",
		"podchaos.chaos-mesh.org/indoubt-1-kill-leader", "networkchaos.chaos-mesh.org/indoubt-2-dcs"}
	code := -1
	for code < 0 {
		select {
		case code = <-done:
		case <-time.After(200 * time.Millisecond):
		}
		out, _, err := k.run(t, "", "get", "networkchaos,podchaos", "-n", ns, "-o", "name")
		if err != nil {
			continue
		}
		note(out)
	}
	// The watches have seen the last deletion's object long before it was deleted.
	stopWatches()
	mu.Lock()
	defer mu.Unlock()
	if code != 0 {
		t.Fatalf("chaos-mesh --apply: exit %d: %s", code, stderr.String())
	}
	for _, o := range want {
		if !seen[o] {
			t.Errorf("%s never seen in namespace %s (seen %v); --apply said:\n%s", o, ns, seen, stderr.String())
		}
	}
	if left := k.must(t, "", "get", "networkchaos,podchaos", "-n", ns, "-o", "name"); left != "" {
		t.Errorf("left after --apply: %s", left)
	}
	for _, verb := range []string{"apply", "delete"} {
		if n := strings.Count(stderr.String(), ": "+verb+" "); n != len(want) {
			t.Errorf("--apply said %s %d times, want %d:\n%s", verb, n, len(want), stderr.String())
		}
	}
	if !slices.ContainsFunc(strings.Split(stderr.String(), "\n"), func(l string) bool { return strings.HasPrefix(l, "applying 4 objects") }) {
		t.Errorf("--apply did not say what it applies:\n%s", stderr.String())
	}
	t.Logf("--apply:\n%s", stderr.String())
}
