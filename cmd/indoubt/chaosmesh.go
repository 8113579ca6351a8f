package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/chaosmesh"
	"github.com/indoubt/indoubt/internal/schedule"
)

const chaosMeshHelp = `indoubt chaos-mesh: the fault schedule as Chaos Mesh objects, for a cluster on Kubernetes.

Partitions between nodes (partition:SHAPE@START-END) become NetworkChaos objects (one
per node that has a grudge, its pod dropping what the pods it has a grudge against
send), toxics on the replication link (latency, bandwidth with link=replication)
NetworkChaos delay or bandwidth from the standby's pod to the primary's, and kill,
pause and failover PodChaos (pod-kill; pod-failure for a pause, as Chaos Mesh has no
SIGSTOP). The shapes are drawn from --seed as indoubt run draws them. Faults without an
equivalent (the proxy's, power loss, restart) are refused by name. The objects are
written as YAML (to --out, or stdout); each carries the annotation indoubt.io/start,
when to create it from the start of the run.

With --apply, and only when a kubeconfig (KUBECONFIG, or ~/.kube/config) names a
current context, kubectl creates each object at its start and deletes it after its
window, while you run indoubt run --dsn against the cluster alongside.

For etcd and Patroni (--topology etcd|patroni) the faults aim at the leader as it is
when they fire, as indoubt run aims them: kill, pause, partition:isolate-primary and
partition:one-way select the leader pod by a label the cluster keeps on it
(--leader-label, such as Patroni's role label with its Kubernetes DCS) among the pods
that carry --cluster-label, since a Chaos Mesh object picks its pods when it is
created; without those labels they are refused. partition:dcs[:NODE]@START-END cuts
the Patroni nodes (or NODE) from the pods of their DCS (--dcs-pod) both ways, leaving
them reaching one another. What cannot be aimed that way (partition:majority, failover,
link toxics) is refused.

Tried on an API server only: every object it writes is accepted by kube-apiserver 1.36
with Chaos Mesh's published CRDs (server-side dry run), and --apply creates and deletes
them there (its test, when scripts/prepare-kube has built the server). No Chaos Mesh
controller and no pods ran: whether a given Chaos Mesh version applies them as indoubt
applies the same faults on one machine is not known. --apply runs kubectl once per
step, so under load an object is created a fraction of a second after its start.

Usage: indoubt chaos-mesh --namespace NS --pod NODE=POD ... --fault SPEC ... [--seed N] [--out FILE] [--apply]
       [--topology etcd|patroni [--leader-label KEY=VALUE --cluster-label KEY=VALUE] [--dcs-pod POD ...]]

Example:
  indoubt chaos-mesh --namespace db --pod n1=redis-0 --pod n2=redis-1 --pod n3=redis-2 \
    --pod n4=sentinel-3 --pod n5=sentinel-4 --fault partition:majority@10s-40s --seed 3
  indoubt chaos-mesh --namespace db --topology patroni --pod n1=pg-0 --pod n2=pg-1 --pod n3=pg-2 \
    --leader-label role=master --cluster-label cluster-name=pg --dcs-pod etcd-0 --dcs-pod etcd-1 \
    --dcs-pod etcd-2 --fault partition:isolate-primary@10s-30s --fault partition:dcs@40s-60s
`

func chaosMeshCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chaos-mesh", chaosMeshHelp, stdout)
	var specs, pods, dcsPods multiFlag
	fs.Var(&specs, "fault", "fault of the schedule, repeatable: partition:SHAPE@START-END, partition:dcs[:NODE]@START-END (--topology patroni), latency:D,link=replication@START-END, kill@START-END, pause@START-END, failover@T")
	fs.Var(&pods, "pod", "NODE=POD, repeatable, in the topology's node order (n1 first): the pod each node of the schedule is")
	ns := fs.String("namespace", "", "the Kubernetes namespace of the pods and the objects")
	primary := fs.String("primary", "", "the node that is primary when the schedule starts (default: the first --pod)")
	seed := fs.Int64("seed", 1, "the seed the shapes are drawn from, as indoubt run --seed")
	out := fs.String("out", "", "write the YAML here instead of stdout")
	apply := fs.Bool("apply", false, "create and delete the objects on the cluster the kubeconfig's current context names, at their windows (needs kubectl)")
	topology := fs.String("topology", "", "etcd or patroni: the faults aim at the leader as they fire (needs --leader-label and --cluster-label)")
	leaderLabel := fs.String("leader-label", "", "KEY=VALUE: the label the cluster keeps on its leader pod (with --topology)")
	clusterLabel := fs.String("cluster-label", "", "KEY=VALUE: a label every pod of the cluster carries (with --leader-label)")
	fs.Var(&dcsPods, "dcs-pod", "a pod of the Patroni cluster's DCS (an etcd member), repeatable: what partition:dcs cuts the nodes from")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chaos-mesh: unexpected argument %q (see indoubt chaos-mesh --help)", fs.Arg(0))
	}
	sched, err := chaosmesh.ParseSchedule(specs)
	if err != nil {
		return fmt.Errorf("chaos-mesh: %w", err)
	}
	if len(sched) == 0 {
		return errors.New("chaos-mesh: no --fault")
	}
	opt := chaosmesh.Options{Namespace: *ns, Pods: map[string]string{}, Primary: *primary, Seed: *seed,
		Topology: *topology, LeaderLabel: *leaderLabel, ClusterLabel: *clusterLabel, DCSPods: dcsPods}
	for _, p := range pods {
		node, pod, ok := strings.Cut(p, "=")
		if !ok || node == "" || pod == "" {
			return fmt.Errorf("chaos-mesh: --pod %q: want NODE=POD, as in n1=redis-0", p)
		}
		opt.Nodes = append(opt.Nodes, node)
		opt.Pods[node] = pod
	}
	if len(opt.Nodes) == 0 {
		return errors.New("chaos-mesh: no --pod: name the pod of each node, as in --pod n1=redis-0")
	}
	objs, err := chaosmesh.Generate(sched, opt)
	if err != nil {
		return err
	}
	y, err := chaosmesh.YAML(objs)
	if err != nil {
		return err
	}
	if *out != "" {
		// Replaced, not written through: a link at --out is not followed.
		if err := atomicfile.Replace(*out, y, 0o644); err != nil {
			return fmt.Errorf("chaos-mesh: %w", err)
		}
	} else if !*apply {
		_, err := stdout.Write(y)
		return err
	}
	if !*apply {
		return nil
	}
	kctx, err := kubeContext()
	if err != nil {
		return fmt.Errorf("chaos-mesh: --apply: %w", err)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		return errors.New("chaos-mesh: --apply needs kubectl on PATH")
	}
	fmt.Fprintf(stderr, "applying %d objects on context %s\n", len(objs), kctx)
	return applyObjects(ctx, objs, sched, stderr)
}

// kubeContext returns the current context of the kubeconfig (KUBECONFIG's first file,
// or ~/.kube/config), or an error when none names one: nothing is sent to a cluster
// that was not named.
func kubeContext() (string, error) {
	path := strings.Split(os.Getenv("KUBECONFIG"), string(os.PathListSeparator))[0]
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", errors.New("no KUBECONFIG and no home directory")
		}
		path = filepath.Join(home, ".kube", "config")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no kubeconfig names a cluster (%v)", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "current-context:"); ok {
			if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("kubeconfig %s has no current-context", path)
}

// applyObjects creates each object at its start with kubectl apply and deletes it
// after its fault's window (a kill's object at once: the pod is gone then), until the
// last window ends or ctx does; what is still there is deleted before it returns.
func applyObjects(ctx context.Context, objs []chaosmesh.Object, sched schedule.Schedule, log io.Writer) error {
	start := time.Now()
	end := map[string]time.Duration{}
	for _, f := range sched {
		end[f.Spec] = f.End
		if !f.Bounded {
			end[f.Spec] = f.Start
		}
	}
	kubectl := func(verb string, o chaosmesh.Object) error {
		y, err := chaosmesh.YAML([]chaosmesh.Object{o})
		if err != nil {
			return err
		}
		args := []string{verb, "-f", "-"}
		if verb == "delete" {
			args = append(args, "--ignore-not-found")
		}
		cmd := exec.CommandContext(context.WithoutCancel(ctx), "kubectl", args...)
		cmd.Stdin = strings.NewReader(string(y))
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s %s: %v: %s", verb, o.Metadata.Name, err, strings.TrimSpace(string(b)))
		}
		fmt.Fprintf(log, "%.2fs: %s %s %s\n", time.Since(start).Seconds(), verb, o.Kind, o.Metadata.Name)
		return nil
	}
	type step struct {
		at     time.Duration
		create bool
		o      chaosmesh.Object
	}
	var steps []step
	for _, o := range objs {
		at, err := o.Start()
		if err != nil {
			return fmt.Errorf("chaos-mesh: %s: %w", o.Metadata.Name, err)
		}
		steps = append(steps, step{at, true, o}, step{end[o.Metadata.Annotations["indoubt.io/fault"]], false, o})
	}
	for i := 1; i < len(steps); i++ {
		for j := i; j > 0 && steps[j].at < steps[j-1].at; j-- {
			steps[j], steps[j-1] = steps[j-1], steps[j]
		}
	}
	var errs []error
	created := map[string]chaosmesh.Object{}
	for _, s := range steps {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(s.at))):
		}
		if ctx.Err() != nil {
			break
		}
		verb := "delete"
		if s.create {
			verb = "apply"
			created[s.o.Metadata.Name] = s.o
		} else {
			delete(created, s.o.Metadata.Name)
		}
		errs = append(errs, kubectl(verb, s.o))
	}
	for _, o := range created {
		errs = append(errs, kubectl("delete", o))
	}
	return errors.Join(errs...)
}
