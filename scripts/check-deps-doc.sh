#!/usr/bin/env bash
# Checks that the table of packages in docs/building.md is the one scripts/deps.sh
# prints (--table), so the docs cannot drift from the one list of dependencies.
#
#   scripts/check-deps-doc.sh        # exit 1 and a diff when they differ
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
doc="$root/docs/building.md"
in_doc=$(awk '/^<!-- deps-table/ { on = 1; next } /^<!-- \/deps-table -->/ { on = 0 } on' "$doc")
want=$(bash "$root/scripts/deps.sh" --table)
if [ "$in_doc" != "$want" ]; then
  echo "check-deps-doc: docs/building.md's table differs from scripts/deps.sh --table:"
  diff <(printf '%s\n' "$in_doc") <(printf '%s\n' "$want") || true
  echo "(paste the output of scripts/deps.sh --table between the deps-table markers)"
  exit 1
fi
echo "check-deps-doc: docs/building.md lists the packages scripts/deps.sh installs"
