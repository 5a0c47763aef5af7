package experiment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Load reads and checks an experiment file. It returns the experiment even
// when it has problems, so callers can report all of them; the returned
// problems include warnings.
func Load(path string) (*Experiment, manifest.Problems) {
	data, err := manifest.ReadFile(path)
	if err != nil {
		return nil, manifest.Problems{{File: path, Msg: fmt.Sprintf("cannot read the experiment: %v", err)}}
	}
	return Parse(path, data)
}

// Parse decodes and checks an experiment from data; file names it in
// problems.
func Parse(file string, data []byte) (*Experiment, manifest.Problems) {
	d := manifest.NewDecoder(file)
	x := &Experiment{}
	d.DecodeDocument(data, x)
	sum := sha256.Sum256(data)
	x.File, x.SHA256, x.Raw, x.Positions = file, hex.EncodeToString(sum[:]), data, d.Positions
	if len(d.Positions) == 0 {
		// Not YAML, or an empty file: nothing was decoded, so semantic
		// checks would only add noise.
		return x, d.Problems
	}
	validate(d, x)
	d.Problems.Sort()
	return x, d.Problems
}
