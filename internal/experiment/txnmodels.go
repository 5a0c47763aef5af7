package experiment

// TxnModels are the consistency models a list-append or rw-register check
// may name, as Elle names them (internal/elle holds what each forbids).
var TxnModels = []string{
	"read-uncommitted", "read-committed", "cursor-stability", "monotonic-view",
	"monotonic-snapshot-read", "monotonic-atomic-view", "read-atomic",
	"causal-cerone", "prefix", "parallel-snapshot-isolation", "update-atomic",
	"consistent-view", "forward-consistent-view", "repeatable-read",
	"snapshot-isolation", "update-serializable", "serializable",
	"strict-serializable", "strong-serializable",
	"strong-session-read-uncommitted", "strong-session-read-committed",
	"strong-session-snapshot-isolation", "strong-session-serializable",
	"strong-read-uncommitted", "strong-read-committed",
	"strong-snapshot-isolation",
}
