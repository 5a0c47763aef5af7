package verdict_test

// Every built-in backend, registered: the built-in adapters come with them.
import _ "github.com/chaos-harness/chaos/internal/backend/all"
