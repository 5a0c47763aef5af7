package kubernetes

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
)

// fakeClient is kubeapi.Interface over client-go's fake clientset, whose
// typed clients have the same methods; only the getters need forwarding.
type fakeClient struct{ cs *fake.Clientset }

var _ kubeapi.Interface = fakeClient{}

func (f fakeClient) Pods(ns string) kubeapi.PodInterface { return f.cs.CoreV1().Pods(ns) }
func (f fakeClient) ConfigMaps(ns string) kubeapi.ConfigMapInterface {
	return f.cs.CoreV1().ConfigMaps(ns)
}
func (f fakeClient) Events(ns string) kubeapi.EventInterface { return f.cs.CoreV1().Events(ns) }
func (f fakeClient) Namespaces() kubeapi.NamespaceInterface  { return f.cs.CoreV1().Namespaces() }
func (f fakeClient) Nodes() kubeapi.NodeInterface            { return f.cs.CoreV1().Nodes() }
func (f fakeClient) Leases(ns string) kubeapi.LeaseInterface {
	return f.cs.CoordinationV1().Leases(ns)
}
func (f fakeClient) Jobs(ns string) kubeapi.JobInterface { return f.cs.BatchV1().Jobs(ns) }
func (f fakeClient) CoreRESTClient() rest.Interface      { return f.cs.CoreV1().RESTClient() }
func (f fakeClient) SelfSubjectAccessReviews() kubeapi.SelfSubjectAccessReviewInterface {
	return f.cs.AuthorizationV1().SelfSubjectAccessReviews()
}
func (f fakeClient) Deployments(ns string) kubeapi.ScalableInterface[*appsv1.Deployment, *appsv1.DeploymentList] {
	return f.cs.AppsV1().Deployments(ns)
}
func (f fakeClient) ReplicaSets(ns string) kubeapi.ScalableInterface[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
	return f.cs.AppsV1().ReplicaSets(ns)
}
func (f fakeClient) StatefulSets(ns string) kubeapi.ScalableInterface[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
	return f.cs.AppsV1().StatefulSets(ns)
}
func (f fakeClient) ServerVersion(context.Context) (*version.Info, error) {
	return f.cs.Discovery().ServerVersion()
}
