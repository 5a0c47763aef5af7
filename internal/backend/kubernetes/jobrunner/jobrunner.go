// Package jobrunner is the kubernetes runner of campaigns: it makes each
// run of a campaign a Job on a cluster.
// The Job's one pod runs the chaos binary of an image
// (scripts/k8s/chaos-image.sh builds it: FROM scratch, the static chaos
// binary and Debian's busybox-static) as `chaos run --seed <the run's
// seed>` against the experiment and adapter the campaign ships in a
// ConfigMap, with the process backend inside the pod: the run's instances
// are processes in the Job's container, isolated from other runs by the
// pod itself (its own network namespace, so its own ports). When the run
// has ended, a readiness probe (the file /runs/.done) makes the pod Ready;
// the runner copies the run directory out of the pod with exec and tar
// (extracted with package tarsafe, as the kubernetes backend collects an
// instance's output) into the campaign directory, tells the pod it may
// end, and deletes the Job.
package jobrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/tarsafe"
)

// DefaultRunnerImage is the image the kubernetes runner uses when none is
// given.
const DefaultRunnerImage = "chaos/chaos:latest"

// DefaultRunnerImageHint says, in flag help, which image the kubernetes
// runner uses by default.
const DefaultRunnerImageHint = DefaultRunnerImage + ", as scripts/k8s/chaos-image.sh imports it"

// Labels on what the kubernetes runner makes.
const (
	LabelCampaign    = kubernetes.LabelCampaign
	LabelCampaignRun = "chaos.campaign-run"
)

// ownerAnnotations name the harness on everything the runner makes, so
// that chaos cleanup with no argument can tell a campaign whose harness
// was killed from one that still runs.
func ownerAnnotations() map[string]string {
	o := backend.CurrentOwner()
	return map[string]string{kubernetes.AnnotationPid: strconv.Itoa(o.Pid), kubernetes.AnnotationPidStart: o.PidStart,
		kubernetes.AnnotationPidNS: o.PidNS, kubernetes.AnnotationHost: o.Host}
}

// KubeOptions configure the kubernetes runner.
type KubeOptions struct {
	// Image holds /bin/chaos and a shell (DefaultRunnerImage when empty).
	Image string
	// Namespace is an existing namespace for the Jobs; empty makes one per
	// campaign, deleted at the end.
	Namespace string
	// Config is the runs' template: its experiment and adapter are shipped
	// to the pods; its OTLP addresses become flags of the pods' runs.
	Config engine.Config
	// Env is the harness's environment ($KUBECONFIG).
	Env []string
	// Settle is --settle as given ("" for the adapter's).
	Settle string
}

// Kube makes each run a Job on a cluster.
type Kube struct {
	o   KubeOptions
	cs  kubeapi.Interface
	cfg *rest.Config

	once    sync.Once
	setup   error
	ns      string
	ownNS   bool
	id      string // the campaign id, as a label value
	owner   map[string]string
	cmName  string
	timeout time.Duration
}

// NewKube checks what the runner needs and connects to the cluster.
func NewKube(o KubeOptions) (*Kube, error) {
	x, a := o.Config.Experiment, o.Config.Adapter
	if a.Backend != "process" {
		return nil, fmt.Errorf("--runner kubernetes runs each run in a Job's pod with the process backend; adapter %s has backend %s", a.ID, a.Backend)
	}
	for name, t := range a.Targets.Named {
		// An external target is a process or container of this machine,
		// which a Job's pod cannot reach.
		if t.Lifecycle != "run" {
			return nil, fmt.Errorf("--runner kubernetes: adapter %s's target %s is external to the run; a Job's pod cannot reach this machine's processes", a.ID, name)
		}
	}
	if o.Image == "" {
		o.Image = DefaultRunnerImage
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	var cfg *rest.Config
	var err error
	if kc := envvar.Get(o.Env, "KUBECONFIG"); kc != "" {
		rules.Precedence = strings.Split(kc, ":")
	} else if c, ierr := rest.InClusterConfig(); ierr == nil {
		cfg = c
	}
	if cfg == nil {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--runner kubernetes: no cluster to talk to ($KUBECONFIG, in-cluster config, ~/.kube/config): %w", err)
		}
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = 50, 100, "chaos-campaign"
	cs, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	to := x.Timeout.D()
	if to <= 0 {
		to = time.Hour
	}
	return &Kube{o: o, cs: cs, cfg: cfg, timeout: to}, nil
}

// prepare makes the namespace (unless one was given) and the ConfigMap of
// inputs, once.
func (k *Kube) prepare(ctx context.Context, dir string) error {
	k.once.Do(func() {
		k.id = strings.ToLower(filepath.Base(dir))
		labels := map[string]string{LabelCampaign: k.id}
		k.owner = ownerAnnotations()
		k.ns = k.o.Namespace
		if k.ns == "" {
			k.ns = "chaos-campaign-" + k.id
			_, err := k.cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns, Labels: labels, Annotations: k.owner}}, metav1.CreateOptions{})
			if err != nil {
				k.setup = fmt.Errorf("creating namespace %s: %w", k.ns, err)
				return
			}
			k.ownNS = true
		}
		k.cmName = "chaos-campaign-" + k.id
		data := map[string]string{"experiment.yaml": string(k.o.Config.Experiment.Raw)}
		if !k.o.Config.Adapter.Builtin {
			data["adapter.yaml"] = string(k.o.Config.Adapter.Raw)
		}
		_, err := k.cs.ConfigMaps(k.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.cmName, Labels: labels, Annotations: k.owner}, Data: data}, metav1.CreateOptions{})
		if err != nil {
			k.setup = fmt.Errorf("creating ConfigMap %s/%s: %w", k.ns, k.cmName, err)
		}
	})
	return k.setup
}

// podScript runs chaos in the Job's pod: the run in the background, a
// SIGTERM or SIGINT (the runner's interrupt) passed on to it as SIGINT, so
// it aborts as chaos run does and completes its run directory; then
// /runs/.done for the readiness probe, and a wait for the runner to say it
// has copied the run out.
const podScript = `cd /runs
/bin/chaos "$@" >/runs/.stdout 2>/runs/.stderr &
pid=$!
trap 'kill -INT $pid 2>/dev/null' INT TERM
code=0
wait $pid || code=$?
while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done
echo $code >/runs/.exit
touch /runs/.done
i=0
while [ ! -e /runs/.collected ] && [ $i -lt 3600 ]; do sleep 1; i=$((i+1)); done
`

func (k *Kube) job(index int, seed uint64) *batchv1.Job {
	name := fmt.Sprintf("chaos-%s-%d", k.id, index)
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = strings.TrimLeft(name, "-")
	}
	adapterRef := k.o.Config.Adapter.ID
	if !k.o.Config.Adapter.Builtin {
		adapterRef = "/in/adapter.yaml"
	}
	args := []string{"run", "--plain", "--runs-dir", "/runs", "--adapter", adapterRef, "--seed", strconv.FormatUint(seed, 10)}
	if k.o.Settle != "" {
		args = append(args, "--settle", k.o.Settle)
	}
	if k.o.Config.OTLPGRPC != "" {
		args = append(args, "--otlp-grpc", k.o.Config.OTLPGRPC)
	}
	if k.o.Config.OTLPHTTP != "" {
		args = append(args, "--otlp-http", k.o.Config.OTLPHTTP)
	}
	args = append(args, "/in/experiment.yaml")
	labels := map[string]string{LabelCampaign: k.id, LabelCampaignRun: strconv.Itoa(index)}
	zero := int32(0)
	deadline := int64((k.timeout + 30*time.Minute).Seconds())
	grace := int64(120)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: k.owner},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &zero,
			ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					AutomountServiceAccountToken:  new(bool),
					EnableServiceLinks:            new(bool),
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:            "chaos",
						Image:           k.o.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         append([]string{"/bin/sh", "-c", podScript, "chaos-run"}, args...),
						Env:             []corev1.EnvVar{{Name: "CHAOS_RUNS_DIR", Value: "/runs"}, {Name: "PATH", Value: "/bin"}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "in", MountPath: "/in", ReadOnly: true},
							{Name: "runs", MountPath: "/runs"},
							{Name: "tmp", MountPath: "/tmp"},
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/test", "-e", "/runs/.done"}}},
							PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 5,
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "in", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: k.cmName}}}},
						{Name: "runs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// Run implements campaignrun.Executor: one Job, its run directory collected into dir.
func (k *Kube) Run(ctx context.Context, dir string, index int, seed uint64) (string, string, error) {
	if err := k.prepare(ctx, dir); err != nil {
		return "", "", err
	}
	j, err := k.cs.Jobs(k.ns).Create(ctx, k.job(index, seed), metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("creating the Job: %w", err)
	}
	// What happens after the campaign is interrupted (the run's abort, its
	// collection, the Job's deletion) gets its own time.
	bg := context.WithoutCancel(ctx)
	defer func() {
		dctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		bgp := metav1.DeletePropagationBackground
		_ = k.cs.Jobs(k.ns).Delete(dctx, j.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &j.UID}, PropagationPolicy: &bgp})
	}()
	pod, err := k.awaitDone(ctx, j)
	where := ""
	if pod != nil {
		where = "pod " + pod.Name
		if pod.Spec.NodeName != "" {
			where += " on " + pod.Spec.NodeName
		}
	}
	if err != nil {
		return "", where, err
	}
	cctx, cancel := context.WithTimeout(bg, 10*time.Minute)
	defer cancel()
	root, err := k.collect(cctx, pod.Name, dir)
	_ = k.exec(cctx, pod.Name, []string{"/bin/touch", "/runs/.collected"}, nil)
	return root, where, err
}

// awaitDone waits for the Job's pod to be Ready (its run has ended). An
// interrupt while the pod runs passes SIGINT to the run and keeps waiting,
// so the aborted run is still collected; an interrupt before it runs gives
// up.
func (k *Kube) awaitDone(ctx context.Context, j *batchv1.Job) (*corev1.Pod, error) {
	deadline := time.Now().Add(k.timeout + 30*time.Minute)
	interrupted := false
	var pod *corev1.Pod
	for {
		pods, err := k.cs.Pods(k.ns).List(context.WithoutCancel(ctx), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(j.UID)})
		if err == nil && len(pods.Items) > 0 {
			pod = &pods.Items[0]
			switch {
			case ready(pod):
				return pod, nil
			case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
				return pod, fmt.Errorf("the Job's pod %s ended %s before its run was collected: %s", pod.Name, pod.Status.Phase, k.tail(context.WithoutCancel(ctx), pod.Name))
			}
			if why := stuck(pod); why != "" {
				return pod, fmt.Errorf("the Job's pod %s cannot start: %s", pod.Name, why)
			}
		}
		if ctx.Err() != nil && !interrupted {
			interrupted = true
			if pod == nil || pod.Status.Phase != corev1.PodRunning {
				return pod, fmt.Errorf("interrupted before the Job's pod ran")
			}
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			err := k.exec(ictx, pod.Name, []string{"/bin/kill", "-INT", "1"}, nil)
			cancel()
			if err != nil {
				return pod, fmt.Errorf("interrupting the run in pod %s: %w", pod.Name, err)
			}
			// The run now aborts; give it as long as chaos run's cleanup.
			deadline = time.Now().Add(11 * time.Minute)
		}
		if time.Now().After(deadline) {
			return pod, fmt.Errorf("the Job's run did not end in time")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "chaos" && c.Ready {
			return true
		}
	}
	return false
}

// stuck says why a pending pod will not start (its image is missing),
// "" when it may still.
func stuck(p *corev1.Pod) string {
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError":
				return w.Reason + ": " + w.Message + " (scripts/k8s/chaos-image.sh imports the image into the test cluster)"
			}
		}
	}
	return ""
}

// tail is the end of what chaos printed in the pod, for an error.
func (k *Kube) tail(ctx context.Context, pod string) string {
	var out bytes.Buffer
	if err := k.exec(ctx, pod, []string{"/bin/tail", "-n", "5", "/runs/.stderr"}, &out); err == nil && out.Len() > 0 {
		return strings.TrimSpace(out.String())
	}
	n := int64(20)
	data, err := k.cs.Pods(k.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "chaos", TailLines: &n}).Do(ctx).Raw()
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(data))
}

// collect copies the pod's run directory into dir/<experiment>/<run-id>.
func (k *Kube) collect(ctx context.Context, pod, dir string) (string, error) {
	xid := k.o.Config.Experiment.ID
	var ls bytes.Buffer
	if err := k.exec(ctx, pod, []string{"/bin/ls", "/runs/" + xid}, &ls); err != nil {
		return "", fmt.Errorf("the run in pod %s left no run directory (%v): %s", pod, err, k.tail(ctx, pod))
	}
	ids := strings.Fields(ls.String())
	if len(ids) != 1 {
		return "", fmt.Errorf("pod %s holds %d run directories, want 1", pod, len(ids))
	}
	runID := ids[0]
	dest := filepath.Join(dir, xid)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := tarsafe.Extract(pr, dest, "")
		_, _ = io.Copy(io.Discard, pr)
		errc <- err
	}()
	err := k.exec(ctx, pod, []string{"/bin/tar", "-C", "/runs/" + xid, "-cf", "-", runID}, pw)
	pw.CloseWithError(err)
	xerr := <-errc
	root := filepath.Join(dest, runID)
	if err != nil {
		return root, fmt.Errorf("copying run %s out of pod %s: %w", runID, pod, err)
	}
	if xerr != nil {
		return root, fmt.Errorf("extracting run %s from pod %s: %w", runID, pod, xerr)
	}
	return root, nil
}

// exec runs cmd in the pod's chaos container, its standard output to
// stdout.
func (k *Kube) exec(ctx context.Context, pod string, cmd []string, stdout io.Writer) error {
	return kubeapi.Exec(ctx, k.cfg, k.cs, k.ns, pod, "chaos", cmd, stdout)
}

// Close deletes what the runner made: its namespace (with every Job left
// in it), or, in a namespace it was given, its ConfigMap and Jobs.
func (k *Kube) Close() error {
	if k.ns == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if k.ownNS {
		err := k.cs.Namespaces().Delete(ctx, k.ns, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	bgp := metav1.DeletePropagationBackground
	sel := metav1.ListOptions{LabelSelector: LabelCampaign + "=" + k.id}
	err1 := k.cs.Jobs(k.ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bgp}, sel)
	err2 := k.cs.ConfigMaps(k.ns).Delete(ctx, k.cmName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err2) {
		err2 = nil
	}
	return errors.Join(err1, err2)
}

// Namespace is where the runner's Jobs are ("" before the first run).
func (k *Kube) Namespace() string { return k.ns }
