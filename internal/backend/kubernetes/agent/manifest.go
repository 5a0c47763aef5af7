package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
)

// DefaultImage is the agent's image unless --image names another: the
// chaos binary with the host tools the network faults run (scripts/k8s/
// agent-image.sh builds it).
const DefaultImage = "chaos/agent:latest"

// object is one object of the manifest, with the API path it is applied
// at.
type object struct {
	path string
	obj  any
}

// objects are the agent's install manifest for namespace ns and image.
// The agent reads pods (and, for the consent, namespaces and the pods'
// controllers) everywhere, and the runs' leases in its own namespace; it
// writes nothing through the API.
//
// apiServer (host:port), when set, is where the agent reaches the API
// server instead of its Service: the pod then uses the node's network, so
// an API server that listens on the node's loopback (the project's test
// cluster, which has no kube-proxy) is reachable.
func objects(ns, image, apiServer string) []object {
	name := kubernetes.AgentApp
	// Cluster-scoped names carry the namespace: agents may be installed
	// in several.
	cname := name + "-" + ns
	labels := map[string]string{kubernetes.AgentAppLabel: name}
	meta := func(n, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: namespace, Labels: labels}
	}
	tm := func(kind, version string) metav1.TypeMeta { return metav1.TypeMeta{Kind: kind, APIVersion: version} }
	yes := true
	hostState := DefaultStateDir + "/" + ns
	dirOrCreate, fileOrCreate, dir := corev1.HostPathDirectoryOrCreate, corev1.HostPathFileOrCreate, corev1.HostPathDirectory
	fieldEnv := func(n, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	hostPath := func(n, path string, t *corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: t}}}
	}
	ds := &appsv1.DaemonSet{TypeMeta: tm("DaemonSet", "apps/v1"), ObjectMeta: meta(name, ns),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					// The pods' processes are found among the node's.
					HostPID: true,
					// Every node, whatever its taints.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            kubernetes.AgentContainer,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{kubernetes.AgentBinary, "agent", "serve"},
						Env: []corev1.EnvVar{fieldEnv("NODE_NAME", "spec.nodeName"), fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
							// The state volume's path on the node, where the
							// file-system layers are mounted (fs.go).
							{Name: HostStateDirEnv, Value: hostState + "/$(NODE_NAME)"}},
						SecurityContext: &corev1.SecurityContext{Privileged: &yes},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "cgroup", MountPath: HostCgroup},
							// A directory per node: nodes that share a host
							// path (the test cluster's, all on one machine)
							// never take over each other's journals.
							{Name: "state", MountPath: DefaultStateDir, SubPathExpr: "$(NODE_NAME)"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []corev1.Volume{
						hostPath("cgroup", "/sys/fs/cgroup", &dir),
						// One directory per agent namespace: agents installed
						// in several never take over each other's runs.
						hostPath("state", hostState, &dirOrCreate),
						// iptables' lock, shared with the node's other users.
						hostPath("xtables-lock", "/run/xtables.lock", &fileOrCreate),
					},
				},
			},
		}}
	if apiServer != "" {
		host, port, _ := strings.Cut(apiServer, ":")
		if port == "" {
			port = "443"
		}
		spec := &ds.Spec.Template.Spec
		spec.HostNetwork = true
		c := &spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port})
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	return []object{
		{"/api/v1/namespaces/" + ns, &corev1.Namespace{TypeMeta: tm("Namespace", "v1"), ObjectMeta: meta(ns, "")}},
		{"/api/v1/namespaces/" + ns + "/serviceaccounts/" + name, &corev1.ServiceAccount{TypeMeta: tm("ServiceAccount", "v1"), ObjectMeta: meta(name, ns)}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles/" + cname, &rbacv1.ClusterRole{TypeMeta: tm("ClusterRole", "rbac.authorization.k8s.io/v1"), ObjectMeta: meta(cname, ""),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"get"}},
			}}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/" + cname, &rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding", "rbac.authorization.k8s.io/v1"), ObjectMeta: meta(cname, ""),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cname}, Subjects: subject}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/roles/" + name, &rbacv1.Role{TypeMeta: tm("Role", "rbac.authorization.k8s.io/v1"), ObjectMeta: meta(name, ns),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}}}}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings/" + name, &rbacv1.RoleBinding{TypeMeta: tm("RoleBinding", "rbac.authorization.k8s.io/v1"), ObjectMeta: meta(name, ns),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subject}},
		{"/apis/apps/v1/namespaces/" + ns + "/daemonsets/" + name, ds},
	}
}

// HostCgroup is where the agent sees the node's cgroup hierarchy (the
// container's own /sys/fs/cgroup is only its own group).
const HostCgroup = "/host/sys/fs/cgroup"

// plain is an object as JSON without what the API server fills in.
func plain(o any) (map[string]any, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	} else if ok {
		if t, ok := spec["template"].(map[string]any); ok {
			if md, ok := t["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
		}
	}
	return m, nil
}

// Manifest is the install manifest as YAML documents.
func Manifest(ns, image, apiServer string) (string, error) {
	var b bytes.Buffer
	for i, o := range objects(ns, image, apiServer) {
		m, err := plain(o.obj)
		if err != nil {
			return "", err
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.String(), nil
}

// Install applies the manifest (server-side apply, so again is harmless);
// done hears of each object.
func Install(ctx context.Context, cs kubeapi.Interface, ns, image, apiServer string, done func(string)) error {
	for _, o := range objects(ns, image, apiServer) {
		m, err := plain(o.obj)
		if err != nil {
			return err
		}
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		err = cs.CoreRESTClient().Patch(types.ApplyPatchType).AbsPath(o.path).Param("fieldManager", "chaos-agent-install").Param("force", "true").Body(data).Do(ctx).Error()
		if err != nil {
			return fmt.Errorf("applying %s: %w", o.path, err)
		}
		done(o.path)
	}
	return nil
}

// Uninstall deletes what Install made, the namespace last; done hears of
// each object deleted.
func Uninstall(ctx context.Context, cs kubeapi.Interface, ns string, done func(string)) error {
	objs := objects(ns, "", "")
	for i := len(objs) - 1; i >= 0; i-- {
		err := cs.CoreRESTClient().Delete().AbsPath(objs[i].path).Do(ctx).Error()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting %s: %w", objs[i].path, err)
		}
		done(objs[i].path)
	}
	return nil
}
