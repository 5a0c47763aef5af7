package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/agent"
	"github.com/chaos-harness/chaos/internal/fsfault"
)

func init() { extraCommands = append(extraCommands, newAgentCmd) }

func newAgentCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent serve|call|install|uninstall",
		Short: "The kubernetes backend's node agent: install it, or run it on a node",
		Long: `The node agent is this binary run by a privileged DaemonSet on every node of
a cluster: it applies the node-level faults (freeze, latency, loss,
bandwidth, reset, blackhole, the resource and clock faults) to the pods of
its node for the runs that ask, serves the file-system faults' layers
there, and reverts what a run applied when the run's lease expires. The harness asks it through the API server, by exec
into the agent's pod (chaos agent call), so the cluster's RBAC decides who
may. docs/kubernetes.md has the details.

Exit codes: 0 done; 2 the cluster refused or could not be reached, or the
daemon could not start or does not answer; 4 an argument or flag that is
not one.`,
		Example: `  chaos agent install --dry-run
  chaos agent install --namespace chaos-system --image registry.example/chaos-agent:1.4
  chaos agent uninstall`,
		Args: noArgs("a subcommand: serve, call, install or uninstall"),
	}
	cmd.AddCommand(newAgentInstallCmd(s), newAgentUninstallCmd(s), newAgentServeCmd(s), newAgentCallCmd(s), newAgentFSServeCmd(s), newAgentFSDetachCmd(s))
	return cmd
}

func newAgentInstallCmd(s *streams) *cobra.Command {
	var ns, image, apiServer string
	var dry bool
	c := &cobra.Command{
		Use:   "install [--namespace NS] [--image IMAGE] [--api-server HOST:PORT] [--dry-run]",
		Short: "Install the node agent into the cluster (or print its manifest)",
		Long: `Apply the node agent's manifest to the cluster of $KUBECONFIG: its namespace,
ServiceAccount, RBAC (read pods, namespaces and the pods' controllers; read
the runs' leases in its namespace) and the DaemonSet. With --dry-run, print
the manifest and touch nothing.

Exit codes: 0 done; 2 the cluster refused or could not be reached.`,
		Example: `  chaos agent install --dry-run > chaos-agent.yaml
  chaos agent install --image registry.example/chaos-agent:1.4`,
		Args: noArgs("no argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dry {
				m, err := agent.Manifest(ns, image, apiServer)
				if err != nil {
					return harnessf("%v", err)
				}
				fmt.Fprint(s.out, m)
				return nil
			}
			cs, _, err := kubernetes.NewClient(s.st.Env)
			if err != nil {
				return harnessf("%v", err)
			}
			if err := agent.Install(cmdContext(cmd), cs, ns, image, apiServer, func(p string) { fmt.Fprintln(s.out, "applied", p) }); err != nil {
				return harnessf("%v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&ns, "namespace", kubernetes.AgentNamespace, "the agent's namespace")
	c.Flags().StringVar(&image, "image", agent.DefaultImage, "the agent's image")
	c.Flags().BoolVar(&dry, "dry-run", false, "print the manifest, apply nothing")
	c.Flags().StringVar(&apiServer, "api-server", "", "HOST:PORT where the agents reach the API server, on the node's network, when pods cannot reach it through its Service (a cluster without kube-proxy)")
	return c
}

func newAgentUninstallCmd(s *streams) *cobra.Command {
	var ns string
	c := &cobra.Command{
		Use:   "uninstall [--namespace NS]",
		Short: "Remove the node agent from the cluster",
		Long: `Delete what chaos agent install applied, its namespace last. The agents'
faults still held are left as they are: run chaos cleanup RUN first.

Exit codes: 0 done; 2 the cluster refused or could not be reached.`,
		Example: `  chaos cleanup --backend kubernetes RUN   # revert what the agents hold for a run
  chaos agent uninstall --namespace chaos-system`,
		Args: noArgs("no argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := kubernetes.NewClient(s.st.Env)
			if err != nil {
				return harnessf("%v", err)
			}
			if err := agent.Uninstall(cmdContext(cmd), cs, ns, func(p string) { fmt.Fprintln(s.out, "deleted", p) }); err != nil {
				return harnessf("%v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&ns, "namespace", kubernetes.AgentNamespace, "the agent's namespace")
	return c
}

func newAgentServeCmd(s *streams) *cobra.Command {
	var socket, state string
	var check time.Duration
	c := &cobra.Command{
		Use:   "serve [--socket PATH] [--state-dir DIR] [--lease-check DURATION]",
		Short: "Run the node agent's daemon (the DaemonSet's command)",
		Long: `Run the node agent's daemon, as the DaemonSet does: it serves requests on a
unix socket, for the node $NODE_NAME, as pod $POD_NAME of namespace
$POD_NAMESPACE (where it reads the runs' leases), and keeps its journals in
--state-dir (a hostPath, so a restarted agent reverts what the one before
it applied). It must run privileged with the node's process namespace
(hostPID) and the node's cgroup hierarchy at ` + agent.HostCgroup + `; it
enters pid 1's cgroup namespace itself (with nsenter).

Exit codes: 0 stopped by a signal; 2 it could not start.`,
		Example: `  # the DaemonSet's command (chaos agent install --dry-run shows it)
  /chaos agent serve
  chaos agent serve --socket /tmp/agent.sock --state-dir /tmp/agent --lease-check 1s`,
		Args: noArgs("no argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := hostCgroupNS(); err != nil {
				return harnessf("%v", err)
			}
			env := map[string]string{}
			for _, k := range []string{"NODE_NAME", "POD_NAME", "POD_NAMESPACE"} {
				env[k] = os.Getenv(k)
				if env[k] == "" {
					return invalidf("$%s is not set (the DaemonSet gives it from the downward API)", k)
				}
			}
			cs, _, err := kubernetes.NewClient(s.st.Env)
			if err != nil {
				return harnessf("%v", err)
			}
			srv, err := agent.New(agent.Config{Node: env["NODE_NAME"], Pod: env["POD_NAME"], Namespace: env["POD_NAMESPACE"], Client: cs,
				StateDir: state, LeaseCheck: check, HostStateDir: os.Getenv(agent.HostStateDirEnv), Detach: agent.DetachOnNode, Logf: func(f string, a ...any) {
					fmt.Fprintf(s.err, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(f, a...))
				}})
			if err != nil {
				return harnessf("%v", err)
			}
			fmt.Fprintf(s.err, "chaos agent: serving node %s on %s\n", env["NODE_NAME"], socket)
			if err := srv.Serve(cmdContext(cmd), socket); err != nil {
				return harnessf("%v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", agent.DefaultSocket, "the unix socket it serves")
	c.Flags().StringVar(&state, "state-dir", agent.DefaultStateDir, "where its journals are")
	c.Flags().DurationVar(&check, "lease-check", agent.DefaultLeaseCheck, "how often the runs' leases are read")
	return c
}

func newAgentCallCmd(s *streams) *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:   "call [--socket PATH]",
		Short: "Relay one JSON request on standard input to the agent's daemon",
		Long: `Relay one request (JSON, on standard input) to the daemon's socket and
write its reply (JSON) to standard output: the harness runs it in the
agent's pod by exec.

Exit codes: 0 relayed (the reply may carry an error); 2 the daemon does not
answer.`,
		Example: `  echo '{"op":"status"}' | kubectl exec -i -n chaos-system ds/chaos-agent -- /chaos agent call`,
		Args:    noArgs("no argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := agent.Call(socket, s.in, s.out); err != nil {
				return harnessf("%v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", agent.DefaultSocket, "the daemon's unix socket")
	return c
}

// newAgentFSServeCmd is what the harness runs by exec in an agent's pod to
// serve a file-system layer on its node (agent/fs.go): hidden, as only
// the harness speaks its protocol.
func newAgentFSServeCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:                kubernetes.AgentFSServe + " " + fsfault.ServeCommand + " DIR OPTIONS",
		Short:              "Serve a run's file-system layer on the node (the harness runs it)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := agent.ServeLayer(args, s.in, s.out, s.err); code != 0 {
				return withCode(code, "")
			}
			return nil
		},
	}
}

// newAgentFSDetachCmd unmounts a run's layers at a directory, run by the
// agent's daemon in the node's mount namespace.
func newAgentFSDetachCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:    agent.DetachCommand + " DIR FSNAME",
		Short:  "Unmount a run's file-system layers at a directory of the node (the agent runs it)",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := fsfault.Detach(args[0], args[1])
			if err != nil {
				return harnessf("%v", err)
			}
			fmt.Fprintf(s.out, "unmounted %d layer(s) over %s\n", n, args[0])
			return nil
		},
	}
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// hostCgroupNS starts the daemon again in pid 1's cgroup namespace when it
// is not in it: /proc/<pid>/cgroup then names the node's groups as they
// are under the node's hierarchy. A process cannot move its Go threads
// there itself, so nsenter does it before the exec.
func hostCgroupNS() error {
	self, err1 := os.Readlink("/proc/self/ns/cgroup")
	init, err2 := os.Readlink("/proc/1/ns/cgroup")
	if err1 != nil || err2 != nil || self == init {
		return nil
	}
	if os.Getenv("CHAOS_AGENT_CGROUPNS") != "" {
		return fmt.Errorf("still not in pid 1's cgroup namespace (%s, not %s) after nsenter: does the pod have hostPID?", self, init)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("nsenter is needed to enter pid 1's cgroup namespace: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(nsenter, append([]string{"nsenter", "--target", "1", "--cgroup", "--", exe}, os.Args[1:]...),
		append(os.Environ(), "CHAOS_AGENT_CGROUPNS=1"))
}
