// Package kubernetes is the kubernetes backend: an instance is a pod on a
// cluster, reached through client-go. The workload's script and the
// harness's wrapper reach the pod in a ConfigMap; its output lives in an
// emptyDir that a small collector container keeps readable after the
// script has ended, and is copied out with exec and tar before the pod is
// deleted. States come from an informer on the run's pods, never from
// polling; the pods' Kubernetes Events are recorded too.
//
// Fleet safety: everything the run creates carries chaos.run=<run id>, and
// every call that deletes, scales or execs into something first reads it
// and refuses unless it carries that label (deletes are then bound to the
// UID that was read).
package kubernetes

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// Name is the backend's name in an adapter's backend field.
const Name = "kubernetes"

// DefaultImage is the image instances run from when neither the workload
// nor the adapter names one: the busybox image chaos build-image makes,
// imported into the cluster's nodes (nothing is pulled by the tests).
const DefaultImage = "chaos/busybox:latest"

// Labels and annotations on everything a run creates.
const (
	LabelRun        = "chaos.run"
	LabelExperiment = "chaos.experiment"
	LabelWorkload   = "chaos.workload"
	LabelInstance   = "chaos.instance"
	LabelRole       = "chaos.role"
	// LabelCampaign marks what a campaign run as Jobs makes (its value
	// is the campaign id in lower case); chaos cleanup looks for it too.
	LabelCampaign = "chaos.campaign"
	// The harness that made it, for chaos cleanup (values labels cannot
	// hold go in annotations).
	AnnotationPid      = "chaos.harness/pid"
	AnnotationPidStart = "chaos.harness/pid-start"
	AnnotationPidNS    = "chaos.harness/pidns"
	AnnotationHost     = "chaos.harness/host"
)

// RoleInstance is the chaos.role label of an instance's pod.
const RoleInstance = "instance"

//go:embed kubernetes.yaml
var builtinAdapter []byte

func init() {
	backend.Register(backend.Registration{
		Name:      Name,
		Doc:       "an instance is a pod on a cluster; roles are sidecar containers or pods found by labels; targets are pods found by labels",
		Instances: backend.Pod,
		Targets:   []backend.Kind{backend.Pod},
		Roles:     []backend.Kind{backend.Container, backend.Pod},
		Support:   support,
		// On the run's pods, served by their node's agent (fs.go).
		FSLayer:  true,
		Check:    check,
		Open:     open,
		Cleanup:  cleanup,
		Adapters: map[string][]byte{"kubernetes.yaml": builtinAdapter},
		// A pod runs on the cluster's nodes; the harness holds one watch
		// per informer over shared connections, and at most maxStreams
		// exec and log streams with a file each.
		Cost: &backend.Cost{BaseFDs: 2*maxStreams + 16},
	})
}

// support says which faults this backend can apply: a freeze acts on a
// whole pod (its cgroup), a held outage needs a controller to scale, and a container is restarted in place only by kubelet, which
// restartPolicy Never forbids.
func support(a *adapter.Adapter, on backend.On, k backend.Kind, fault string) string {
	o, err := parseOptions(a.Options)
	if err != nil {
		return err.Error()
	}
	never := o.restartPolicy == "Never"
	if experiment.IsFSFault(fault) {
		return fsSupport(a, on)
	}
	if o.noExec && (on == backend.OnInstances || k == backend.Container) && fault != experiment.FaultKill {
		return "options.exec is false: a pod's containers cannot be reached, so only kill (the pod's deletion) acts on an instance"
	}
	if experiment.IsNetworkFault(fault) {
		// network.go: the pod's namespace, from this machine.
		if on == backend.OnRole && k == backend.Container {
			return "the containers of a pod share its network namespace: a network fault there acts on the whole pod; aim it at the instance"
		}
		return ""
	}
	if experiment.IsClockFault(fault) {
		// nodepod.go: the pod's processes, patched on their node (by its
		// agent, or from this machine).
		if on == backend.OnRole && k == backend.Container {
			return "a clock fault acts on every process of a pod: aim it at the instance"
		}
		return ""
	}
	if experiment.IsResourceFault(fault) {
		// resource.go: the container's cgroups, on this machine.
		return ""
	}
	switch {
	case fault == experiment.FaultFreeze:
		// freeze.go: the pod's cgroup, on this machine.
		if on == backend.OnRole && k == backend.Container {
			return "a sidecar is frozen with its pod: aim the freeze at the instance"
		}
		return ""
	case on == backend.OnInstances || k == backend.Container:
		switch fault {
		case experiment.FaultKill:
			return ""
		case experiment.FaultOutage:
			return "kubelet restarts a container on its own schedule, so a container cannot be held down; no outage"
		}
		if never {
			return fmt.Sprintf("the pods' restartPolicy is Never, so a killed container is not started again: no %s (set options.restart-policy: OnFailure)", fault)
		}
	}
	return ""
}

// options are the backend's settings from the adapter's options map.
type options struct {
	kubeconfig     string
	namespace      string
	restartPolicy  string
	cpu, memory    resource.Quantity
	memoryLimit    resource.Quantity
	grace          int64
	qps            float32
	burst          int
	pullPolicy     string
	collectorImage string
	// nodeSelector and tolerations place the run's pods (on kwok's
	// simulated nodes, say).
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	// noExec: the pods' containers cannot be exec'd into or read (nodes
	// simulated by kwok have no containers): a kill deletes the pod, and
	// no output or log is collected.
	noExec bool
	// targetNamespaces are where external pod targets are, by target.
	targetNamespaces map[string]string
	// agentNamespace is where the node agents run (agent.go).
	agentNamespace string
}

// optionKeys are the keys an adapter's options may have.
var optionKeys = []string{"kubeconfig", "namespace", "restart-policy", "image-pull-policy", "collector-image", "cpu", "memory", "memory-limit", "grace", "qps", "burst", "node-selector", "tolerations", "exec", "target-namespaces", "agent-namespace"}

var namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func parseOptions(m map[string]string) (options, error) {
	o := options{agentNamespace: AgentNamespace, restartPolicy: "Never", pullPolicy: "IfNotPresent", grace: 2, qps: 50, burst: 100,
		cpu: resource.MustParse("10m"), memory: resource.MustParse("32Mi"), memoryLimit: resource.MustParse("256Mi")}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		var err error
		switch k {
		case "kubeconfig":
			o.kubeconfig = v
		case "namespace":
			if !namespacePattern.MatchString(v) {
				err = fmt.Errorf("%q is not a namespace name (lower-case letters, digits and dashes, at most 63)", v)
			}
			o.namespace = v
		case "restart-policy":
			// Always would start an instance whose script ended again.
			if !slices.Contains([]string{"Never", "OnFailure"}, v) {
				err = fmt.Errorf("%q: expected Never or OnFailure", v)
			}
			o.restartPolicy = v
		case "image-pull-policy":
			if !slices.Contains([]string{"IfNotPresent", "Never", "Always"}, v) {
				err = fmt.Errorf("%q: expected IfNotPresent, Never or Always", v)
			}
			o.pullPolicy = v
		case "collector-image":
			o.collectorImage = v
		case "cpu":
			o.cpu, err = resource.ParseQuantity(v)
		case "memory":
			o.memory, err = resource.ParseQuantity(v)
		case "memory-limit":
			o.memoryLimit, err = resource.ParseQuantity(v)
		case "grace":
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil {
				o.grace = int64(d.Round(time.Second) / time.Second)
			}
		case "qps":
			var f float64
			f, err = strconv.ParseFloat(v, 32)
			o.qps = float32(f)
		case "burst":
			o.burst, err = strconv.Atoi(v)
		case "node-selector":
			o.nodeSelector, err = parseNodeSelector(v)
		case "tolerations":
			o.tolerations, err = parseTolerations(v)
		case "target-namespaces":
			o.targetNamespaces, err = parseNodeSelector(v)
			for t, ns := range o.targetNamespaces {
				if err == nil && !namespacePattern.MatchString(ns) {
					err = fmt.Errorf("target %s: %q is not a namespace name", t, ns)
				}
			}
		case "agent-namespace":
			if !namespacePattern.MatchString(v) {
				err = fmt.Errorf("%q is not a namespace name", v)
			}
			o.agentNamespace = v
		case "exec":
			var yes bool
			yes, err = strconv.ParseBool(v)
			o.noExec = !yes
		default:
			err = fmt.Errorf("unknown option%s; the kubernetes backend reads %s", manifestHint(k), strings.Join(optionKeys, ", "))
		}
		if err != nil {
			return o, fmt.Errorf("options.%s: %w", k, err)
		}
	}
	return o, nil
}

// parseNodeSelector reads "key=value,key=value".
func parseNodeSelector(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: expected key=value[,key=value...]", v)
		}
		m[k] = val
	}
	return m, nil
}

// parseTolerations reads "key[=value][:effect],...": without a value the
// toleration matches the key with any value (operator Exists), without an
// effect any effect.
func parseTolerations(v string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		kv, effect, _ := strings.Cut(item, ":")
		k, val, hasVal := strings.Cut(kv, "=")
		if k == "" {
			return nil, fmt.Errorf("%q: expected key[=value][:effect][,...]", v)
		}
		t := corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists}
		if hasVal {
			t.Operator, t.Value = corev1.TolerationOpEqual, val
		}
		switch e := corev1.TaintEffect(effect); e {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return nil, fmt.Errorf("%q: effect %q: expected NoSchedule, PreferNoSchedule or NoExecute", v, effect)
		}
		out = append(out, t)
	}
	return out, nil
}

func manifestHint(k string) string {
	for _, o := range optionKeys {
		if strings.EqualFold(strings.ReplaceAll(o, "-", ""), strings.ReplaceAll(k, "_", "")) {
			return fmt.Sprintf(" (did you mean %q?)", o)
		}
	}
	return ""
}

// check reports an adapter's options this backend cannot read.
func check(a *adapter.Adapter) []adapter.BackendProblem {
	if _, err := parseOptions(a.Options); err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return []adapter.BackendProblem{{Field: field, Msg: msg}}
	}
	return nil
}

// restConfig is the client configuration: options.kubeconfig, else
// $KUBECONFIG from the harness's environment, else the in-cluster config,
// else ~/.kube/config.
func restConfig(o options, hostEnv []string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	switch {
	case o.kubeconfig != "":
		rules.ExplicitPath = o.kubeconfig
	case envvar.Get(hostEnv, "KUBECONFIG") != "":
		rules.Precedence = strings.Split(envvar.Get(hostEnv, "KUBECONFIG"), ":")
	default:
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to (options.kubeconfig, $KUBECONFIG, in-cluster config, ~/.kube/config): %w", err)
	}
	return cfg, nil
}

// newClient makes a client with the rate limits of o: client-go's
// defaults (5 requests a second) would make a fault on many pods crawl.
func newClient(o options, hostEnv []string) (*kubeapi.Client, *rest.Config, error) {
	cfg, err := restConfig(o, hostEnv)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "chaos"
	cs, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cs, cfg, nil
}

// serverVersion asks the API server its version, giving up after 15 s.
func serverVersion(ctx context.Context, cs kubeapi.Interface) (string, error) {
	v, err := cs.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// dnsName makes s a DNS-1123 label: lower case, dashes, at most 63.
func dnsName(parts ...string) string {
	s := strings.ToLower(strings.Join(parts, "-"))
	s = invalidDNS.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

var invalidDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// labelValue makes s a valid label value.
func labelValue(s string) string {
	s = invalidLabel.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "_.-")
}

var invalidLabel = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// NewClient is a client of the cluster env's kubeconfig (or the
// in-cluster configuration) names, as cleanup makes one.
func NewClient(env []string) (kubeapi.Interface, *rest.Config, error) {
	cs, cfg, err := newClient(options{qps: 50, burst: 100}, env)
	if err != nil {
		return nil, nil, err
	}
	return cs, cfg, nil
}
