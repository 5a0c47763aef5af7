#!/bin/sh
# Written by chaos: runs the workload's script in the instance's output
# directory and records each start and the script's exit code.
out="${CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR:?}"
mkdir -p "$out/.chaos"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) start" >> "$out/.chaos/attempts"
rm -f "$out/.chaos/exit_code"
cd "$out" || exit 125
/bin/sh "${CHAOS_RUN_SCRIPT:?}"
code=$?
echo "$code" > "$out/.chaos/exit_code.tmp" && mv "$out/.chaos/exit_code.tmp" "$out/.chaos/exit_code"
exit "$code"
