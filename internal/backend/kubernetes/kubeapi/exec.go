package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// Exec runs cmd in a container of pod ns/pod, with its standard output to
// stdout (nil: discarded): over WebSocket, or SPDY where the server cannot
// upgrade to it, as kubectl exec does. A command that exits non-zero is an
// error with its standard error.
func Exec(ctx context.Context, cfg *rest.Config, cs Interface, ns, pod, container string, cmd []string, stdout io.Writer) error {
	return ExecIO(ctx, cfg, cs, ns, pod, container, cmd, nil, stdout)
}

// ExecIO is Exec with stdin (nil: none) as the command's standard input.
func ExecIO(ctx context.Context, cfg *rest.Config, cs Interface, ns, pod, container string, cmd []string, stdin io.Reader, stdout io.Writer) error {
	req := cs.CoreRESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true}, ParameterCodec())
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	if stdout == nil {
		stdout = io.Discard
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: &stderr})
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		return fmt.Errorf("%s in %s/%s exited %d: %s", cmd[0], pod, container, code.Code, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	return nil
}
