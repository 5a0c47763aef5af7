// Package kubefake is kubeapi.Interface over client-go's fake clientset,
// for tests: its typed clients have the same methods, so only the getters
// need forwarding. Only tests import it.
package kubefake

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
)

// Client is kubeapi.Interface over a fake clientset.
type Client struct{ CS *fake.Clientset }

var _ kubeapi.Interface = Client{}

func (f Client) Pods(ns string) kubeapi.PodInterface { return f.CS.CoreV1().Pods(ns) }
func (f Client) ConfigMaps(ns string) kubeapi.ConfigMapInterface {
	return f.CS.CoreV1().ConfigMaps(ns)
}
func (f Client) Events(ns string) kubeapi.EventInterface { return f.CS.CoreV1().Events(ns) }
func (f Client) Namespaces() kubeapi.NamespaceInterface  { return f.CS.CoreV1().Namespaces() }
func (f Client) Nodes() kubeapi.NodeInterface            { return f.CS.CoreV1().Nodes() }
func (f Client) Leases(ns string) kubeapi.LeaseInterface {
	return f.CS.CoordinationV1().Leases(ns)
}
func (f Client) Jobs(ns string) kubeapi.JobInterface { return f.CS.BatchV1().Jobs(ns) }
func (f Client) CoreRESTClient() rest.Interface      { return f.CS.CoreV1().RESTClient() }
func (f Client) SelfSubjectAccessReviews() kubeapi.SelfSubjectAccessReviewInterface {
	return f.CS.AuthorizationV1().SelfSubjectAccessReviews()
}
func (f Client) Deployments(ns string) kubeapi.ScalableInterface[*appsv1.Deployment, *appsv1.DeploymentList] {
	return f.CS.AppsV1().Deployments(ns)
}
func (f Client) ReplicaSets(ns string) kubeapi.ScalableInterface[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
	return f.CS.AppsV1().ReplicaSets(ns)
}
func (f Client) StatefulSets(ns string) kubeapi.ScalableInterface[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
	return f.CS.AppsV1().StatefulSets(ns)
}
func (f Client) ServerVersion(context.Context) (*version.Info, error) {
	return f.CS.Discovery().ServerVersion()
}
