package kubernetes

import "github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi/kubefake"

// fakeClient is kubeapi.Interface over client-go's fake clientset.
type fakeClient = kubefake.Client
