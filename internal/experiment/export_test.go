package experiment

// BadExperimentsForFuzz exposes the bad manifests of validate_test.go to
// the external test package's fuzz target.
func BadExperimentsForFuzz() []string {
	out := make([]string, len(badExperiments))
	for i, tc := range badExperiments {
		out[i] = tc.yaml
	}
	return out
}
