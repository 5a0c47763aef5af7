package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/export"
)

func init() { extraCommands = append(extraCommands, newExportCmd) }

func newExportCmd(s *streams) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export RUN... [-o FILE]",
		Short: "Write the metrics runs recorded as OpenMetrics text, for Prometheus",
		Long: `Write every successful scrape of every metrics source of the runs as
OpenMetrics text, each sample with its scrape's timestamp and the labels
chaos_run, chaos_experiment and chaos_source. Families are merged across
runs, and the text ends with "# EOF". Failed scrapes are skipped.

Load it into a Prometheus data directory with

  promtool tsdb create-blocks-from openmetrics FILE DATA_DIR

and point Prometheus (and chaos dashboard's Grafana dashboard) at it.

The text goes to standard output, or to FILE with -o; a summary goes to
standard error.

Exit codes: 0 written; 4 a RUN is not a run directory (or a metrics file of
one is refused); 2 FILE could not be written.`,
		Example: `  chaos export runs/etcd-kill-keeps-writes/* -o runs.om
  promtool tsdb create-blocks-from openmetrics runs.om ./data`,
		Args: minArgs("at least one run directory (RUN...)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := loadRuns(cmd.Context(), args)
			if err != nil {
				return err
			}
			report := func(rep *export.Report) {
				for _, w := range rep.Warnings {
					fmt.Fprintf(s.err, "warning: %s\n", w)
				}
			}
			var rep *export.Report
			if f := createBeside(out); f != nil {
				// Straight into a file beside FILE, renamed over it when
				// all is written: a large run's text is not held whole.
				fw := &errWriter{w: f}
				rep, err = export.OpenMetrics(fw, runs)
				if rep != nil && (err == nil || fw.err != nil) {
					report(rep)
				}
				if err := finishBeside(f, out, err, fw.err); err != nil {
					return err
				}
				fmt.Fprintf(s.err, "OpenMetrics text written to %s\n", out)
			} else {
				var b bytes.Buffer
				rep, err = export.OpenMetrics(&b, runs)
				if err != nil {
					return withExitCode(fmt.Errorf("exporting: %w", err), ExitInvalid)
				}
				report(rep)
				if err := viewWrite(s, out, b.Bytes(), "OpenMetrics text"); err != nil {
					return err
				}
			}
			fmt.Fprintf(s.err, "exported %s of %s in %s from %s (%s skipped)\n",
				exportCount(rep.Samples, "sample"), exportCount(rep.Series, "series"), exportCount(rep.Families, "family"),
				exportCount(rep.Runs, "run"), exportCount(rep.FailedScrapes, "failed scrape"))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to `FILE` instead of standard output")
	return cmd
}

// exportCount says "1 run", "2 runs", "3 series", "2 families".
func exportCount(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	switch {
	case strings.HasSuffix(noun, "series"):
	case strings.HasSuffix(noun, "y"):
		noun = strings.TrimSuffix(noun, "y") + "ies"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// createBeside opens a temporary file in FILE's directory, or gives nil
// (standard output, or a directory that does not exist or cannot be
// written: the export then goes through memory and viewWrite says why).
func createBeside(file string) *os.File {
	if file == "" || file == "-" {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(file), ".tmp-"+filepath.Base(file))
	if err != nil {
		return nil
	}
	return f
}

// finishBeside renames the temporary file over FILE once the export is
// written, or removes it; the errors and exit codes are viewWrite's and
// the export's.
func finishBeside(f *os.File, file string, exportErr, writeErr error) error {
	fail := func(err error) error {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	switch {
	case writeErr != nil:
		return fail(harnessf("writing the OpenMetrics text: %v", writeErr))
	case exportErr != nil:
		return fail(withExitCode(fmt.Errorf("exporting: %w", exportErr), ExitInvalid))
	}
	if err := f.Close(); err != nil {
		return fail(harnessf("writing the OpenMetrics text: %v", err))
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fail(harnessf("writing the OpenMetrics text: %v", err))
	}
	if err := os.Rename(f.Name(), file); err != nil {
		return fail(harnessf("writing the OpenMetrics text: %v", err))
	}
	return nil
}

// errWriter keeps the first error of w.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
