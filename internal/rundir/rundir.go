// Package rundir owns the run directory: the one place a run's evidence
// lives. It knows paths, the timeline and the JSON files a run writes, and
// nothing of backends, so anything that reads a run (evaluate, reports) can
// work on a copy of the directory on any machine.
package rundir

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/safefile"
)

// FormatVersion is the version of the run directory layout; manifest.json
// records it so readers can tell old runs apart. 2: operation.started
// records its target as an object ({"name": ...}, {"workload": ...}) where
// 1 wrote text ("gateway", "{workload: counter}"); readers take both
// (TargetText).
const FormatVersion = 2

// Dir is a run directory. Readers of a run go through its methods (Open,
// ReadFile, Glob, WriteFile...), which stay inside Root.
type Dir struct {
	Root string

	mu sync.Mutex
	r  *os.Root
}

// NewRunID returns a run id such as 20261029T112646Z-2f79: the UTC start
// time, then four random hex digits so runs started in the same second
// differ. Within one process the digits are never drawn twice for the same
// second: a campaign starts dozens of runs a second, and one whose
// directory was already deleted (--keep failed) would otherwise give its
// id to a later run, two ledger lines for one id.
func NewRunID(now time.Time) string {
	sec := now.UTC().Format("20060102T150405Z")
	issued.Lock()
	defer issued.Unlock()
	if issued.sec != sec {
		issued.sec, issued.ids = sec, map[string]bool{}
	}
	for {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		id := sec + "-" + hex.EncodeToString(b)
		if !issued.ids[id] || len(issued.ids) >= 1<<16 {
			issued.ids[id] = true
			return id
		}
	}
}

// issued are the ids NewRunID gave out in the second it gave out the last.
var issued struct {
	sync.Mutex
	sec string
	ids map[string]bool
}

// Create makes the run directory runsDir/<experiment>/<runID> and its fixed
// subdirectories. A directory that already exists is refused, even one
// made at the same moment by another process.
func Create(runsDir, experimentID, runID string) (*Dir, error) {
	root := filepath.Join(runsDir, experimentID, runID)
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("run directory %s already exists", root)
		}
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	d := &Dir{Root: root}
	for _, sub := range []string{"logs", "system/metrics", "system/watch", "workloads"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return nil, fmt.Errorf("creating run directory: %w", err)
		}
	}
	return d, nil
}

// Open checks that root looks like a run directory: a directory holding
// experiment.yaml and timeline.jsonl, neither leading out of it.
func Open(root string) (*Dir, error) {
	d := &Dir{Root: root}
	if _, err := d.root(); err != nil {
		return nil, fmt.Errorf("%s is not a run directory: %v", root, err)
	}
	for _, f := range []string{"experiment.yaml", "timeline.jsonl"} {
		if _, err := d.Stat(f); err != nil {
			if IsEscape(err) {
				return nil, err
			}
			return nil, fmt.Errorf("%s is not a run directory: %s is missing", root, f)
		}
	}
	return d, nil
}

// Path joins elements under the run directory.
func (d *Dir) Path(elem ...string) string {
	return filepath.Join(append([]string{d.Root}, elem...)...)
}

// Fixed files of a run directory.
func (d *Dir) ExperimentFile() string { return d.Path("experiment.yaml") }
func (d *Dir) AdapterFile() string    { return d.Path("adapter.yaml") }
func (d *Dir) ManifestFile() string   { return d.Path("manifest.json") }
func (d *Dir) TimelineFile() string   { return d.Path("timeline.jsonl") }
func (d *Dir) VerdictFile() string    { return d.Path("verdict.json") }
func (d *Dir) ReportFile() string     { return d.Path("report.html") }
func (d *Dir) HarnessLog() string     { return d.Path("logs", "harness.log") }
func (d *Dir) LogFile(name string) string {
	return d.Path("logs", name+".log")
}
func (d *Dir) SystemDir() string           { return d.Path("system") }
func (d *Dir) EvaluationsDir() string      { return d.Path("evaluations") }
func (d *Dir) WorkloadDir(w string) string { return d.Path("workloads", w) }

// InstanceDir is workloads/<w>/instances/<i>.
func (d *Dir) InstanceDir(w, i string) string { return d.Path("workloads", w, "instances", i) }

// OutputDir is the instance's collected output directory.
func (d *Dir) OutputDir(w, i string) string { return filepath.Join(d.InstanceDir(w, i), "output") }

// Manifest is manifest.json: what ran.
type Manifest struct {
	Format     int    `json:"format"`
	RunID      string `json:"run_id"`
	Experiment struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
		File    string `json:"file"`
		SHA256  string `json:"sha256"`
	} `json:"experiment"`
	Adapter struct {
		ID      string `json:"id"`
		Backend string `json:"backend"`
		File    string `json:"file"`
		SHA256  string `json:"sha256"`
	} `json:"adapter"`
	Harness struct {
		Version string `json:"version"`
		Go      string `json:"go"`
	} `json:"harness"`
	Git  *GitState `json:"git,omitempty"`
	Seed uint64    `json:"seed"`
	// Schedules are what the flow's generate nodes drew from Seed.
	Schedules []Schedule        `json:"schedules,omitempty"`
	Host      Host              `json:"host"`
	Started   time.Time         `json:"started"`
	Command   []string          `json:"command"`
	Replay    string            `json:"replay"`
	Backend   map[string]string `json:"backend,omitempty"`
	Images    map[string]string `json:"images,omitempty"`
	// Processes says how the run contained the processes it started on
	// this machine; nil in runs made before it was recorded.
	Processes *Processes `json:"processes,omitempty"`
	// Ports are the free loopback ports the run allocated for the
	// adapter's ports, by name.
	Ports map[string]int `json:"ports,omitempty"`
}

// GitState is the commit of the working tree the experiment file is in,
// and whether it had uncommitted changes.
type GitState struct {
	SHA   string `json:"sha"`
	Dirty bool   `json:"dirty"`
}

// Processes is manifest.json's processes: the mode the run's process
// supervisor used (cgroup or process-group), the run's cgroup tree in
// cgroup mode, and why cgroups were not used otherwise.
type Processes struct {
	Mode   string `json:"mode"`
	Cgroup string `json:"cgroup,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Host describes the machine a run ran on.
type Host struct {
	Name   string `json:"name"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Kernel string `json:"kernel,omitempty"`
	CPUs   int    `json:"cpus"`
	User   string `json:"user,omitempty"`
}

// WriteJSON writes v as indented JSON to path atomically.
func WriteJSON(path string, v any) error {
	data, err := MarshalJSON(v)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// MarshalJSON is v as the run directory's JSON files are written:
// indented, with <, > and & kept as they are (people read these files too).
func MarshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadJSON reads path (at most limits.MaxJSONBytes) into v. Readers of a
// run directory use Dir.ReadJSONFile, which stays inside it.
func ReadJSON(path string, v any) error {
	f, err := safefile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := readAllMax(f, path, limits.MaxJSONBytes)
	if err != nil {
		return err
	}
	return unmarshalJSON(path, data, v)
}

func unmarshalJSON(name string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file, so a reader
// never sees half a file.
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
