package manifest

import "regexp"

// namePattern is the rule for every name a manifest gives (ids, workloads,
// operations, checks, steps, targets, metrics endpoints, watchers) and so
// for every name a run directory holds that becomes a path: lower-case
// letters, digits, dots, underscores and dashes, starting and ending with
// a letter or digit. It has no "/" and cannot be "." or "..".
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

// MaxNameLen bounds a name, so a path made of names stays short.
const MaxNameLen = 200

// ValidName reports whether s is a valid name.
func ValidName(s string) bool { return len(s) <= MaxNameLen && namePattern.MatchString(s) }

// NameRule says what a valid name is, for messages.
const NameRule = "use lower-case letters, digits, dots, underscores and dashes, starting and ending with a letter or digit"
