package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// CapturedContainer is one entry of system/containers.json.
type CapturedContainer struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Image      string            `json:"image"`
	Workload   string            `json:"workload,omitempty"`
	Instance   string            `json:"instance,omitempty"`
	Role       string            `json:"role,omitempty"`
	State      string            `json:"state"`
	Running    bool              `json:"running"`
	Paused     bool              `json:"paused"`
	ExitCode   int               `json:"exit_code"`
	OOMKilled  bool              `json:"oom_killed"`
	StartedAt  string            `json:"started_at,omitempty"`
	FinishedAt string            `json:"finished_at,omitempty"`
	Labels     map[string]string `json:"labels"`
}

// CaptureFile is the name of the capture in the run's system directory.
const CaptureFile = "containers.json"

// Capture writes system/containers.json: a JSON array with every container
// labelled chaos.run=<RunID> that still exists, with its state and paused
// flag as the engine reports them. An empty array means nothing leaked, so
// adapter checks can read it with e.g. `jq -e 'length == 0'` (no leaked
// containers) and `jq -e 'map(select(.paused)) | length == 0'` (nothing
// paused).
func (b *Backend) Capture(ctx context.Context, systemDir string) error {
	list, err := b.list(ctx, nil)
	if err != nil {
		return err
	}
	out := []CapturedContainer{}
	for _, c := range list {
		res, err := b.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		ci := res.Container
		e := CapturedContainer{ID: ci.ID, Name: strings.TrimPrefix(ci.Name, "/"), Labels: c.Labels,
			Workload: c.Labels[LabelWorkload], Instance: c.Labels[LabelInstance], Role: c.Labels[LabelRole]}
		if ci.Config != nil {
			e.Image = ci.Config.Image
		}
		if s := ci.State; s != nil {
			e.State, e.Running, e.Paused, e.ExitCode, e.OOMKilled = string(s.Status), s.Running, s.Paused, s.ExitCode, s.OOMKilled
			e.StartedAt, e.FinishedAt = s.StartedAt, s.FinishedAt
		}
		out = append(out, e)
	}
	if err := os.MkdirAll(systemDir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(systemDir, CaptureFile), append(data, '\n'), 0o644)
}

// Result is one preflight check's outcome.
type Result struct {
	Name   string
	OK     bool
	Detail string
}

// PreflightOptions says what the docker preflight checks.
type PreflightOptions struct {
	// Images the run will create containers from; each must be present
	// locally, since nothing is pulled.
	Images []string
	// Hints maps an image to the command that builds it, shown when it is
	// missing (the busybox test image's is known already).
	Hints map[string]string
	// MinFreeBytes is the free space the engine's root needs (default 1 GiB).
	MinFreeBytes uint64
}

// DefaultMinFree is the free space preflight asks of the engine's root.
const DefaultMinFree = 1 << 30

// Preflight checks that the engine is reachable, that every image is
// present locally (saying how to build it when it is not), and that the
// engine's data root has room.
func Preflight(ctx context.Context, opts PreflightOptions) []Result {
	var out []Result
	cli, err := Connect()
	if err == nil {
		defer cli.Close()
	}
	var v client.ServerVersionResult
	if err == nil {
		v, err = cli.ServerVersion(ctx, client.ServerVersionOptions{})
	}
	if err != nil {
		return append(out, Result{Name: "docker-engine-reachable", Detail: fmt.Sprintf("cannot reach the Docker engine (DOCKER_HOST=%q): %v", os.Getenv("DOCKER_HOST"), err)})
	}
	out = append(out, Result{Name: "docker-engine-reachable", OK: true, Detail: fmt.Sprintf("Docker Engine %s, API %s (client negotiated %s)", v.Version, v.APIVersion, cli.ClientVersion())})

	seen := map[string]bool{}
	for _, ref := range opts.Images {
		if ref == "" || seen[ref] {
			continue
		}
		seen[ref] = true
		name := "docker-image-present:" + ref
		res, err := cli.ImageInspect(ctx, ref)
		switch {
		case cerrdefs.IsNotFound(err):
			out = append(out, Result{Name: name, Detail: fmt.Sprintf("image %s is not present locally and the harness never pulls; %s", ref, BuildHint(ref, opts.Hints))})
		case err != nil:
			out = append(out, Result{Name: name, Detail: err.Error()})
		default:
			out = append(out, Result{Name: name, OK: true, Detail: res.ID})
		}
	}

	out = append(out, diskSpace(ctx, cli, opts.MinFreeBytes))
	return out
}

func diskSpace(ctx context.Context, cli *client.Client, min uint64) Result {
	const name = "docker-disk-space"
	if min == 0 {
		min = DefaultMinFree
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Result{Name: name, Detail: err.Error()}
	}
	root := info.Info.DockerRootDir
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		// A remote or rootless engine's root is not visible from here.
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) {
			return Result{Name: name, OK: true, Detail: fmt.Sprintf("not checked: the engine's root %s is not visible on this machine", root)}
		}
		return Result{Name: name, Detail: fmt.Sprintf("statfs %s: %v", root, err)}
	}
	free := st.Bavail * uint64(st.Bsize)
	detail := fmt.Sprintf("%s: %.1f GiB free (need %.1f GiB)", root, float64(free)/(1<<30), float64(min)/(1<<30))
	return Result{Name: name, OK: free >= min, Detail: detail}
}
