#!/usr/bin/env bash
# Checks that every relative link in the repository's Markdown files resolves: the file
# or folder it names exists, and a #fragment names a heading of the Markdown file it
# points to (GitHub's anchors: lower case, punctuation dropped, spaces made hyphens).
# Links inside code (fenced blocks, `spans`) and external links (a scheme such as https:) are not
# checked. Prints each broken link as FILE:LINE: TARGET (why); exits 1 if there is one.
#
#   scripts/check-doc-links.sh          # from anywhere in the repository
#
# scripts/run-tests.sh runs it as its "docs" stage.
set -euo pipefail
export LC_ALL=C.UTF-8

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.md' |
    while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done)
else
  mapfile -t files < <(find . -name '*.md' -not -path './build*' | sed 's|^\./||')
fi

# anchors FILE: the anchor of every heading of a Markdown file, one per line.
anchors() {
  awk '/^```/ { fence = !fence; next } !fence && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    tr '[:upper:]' '[:lower:]' | sed -e 's/[^[:alnum:] _-]//g' -e 's/ /-/g'
}

broken=0
checked=0
for file in "${files[@]}"; do
  dir=$(dirname "$file")
  # LINE<TAB>TARGET for each [text](target) outside fenced code blocks.
  while IFS=$'\t' read -r line target; do
    checked=$((checked + 1))
    target=${target%% *} # drop a "title"
    case "$target" in
      *:*) continue ;; # https:, mailto:, ...
    esac
    path=${target%%#*}
    fragment=
    [[ "$target" == *#* ]] && fragment=${target#*#}
    if [ -z "$path" ]; then
      resolved=$file
    else
      resolved=$dir/$path
    fi
    if [ ! -e "$resolved" ]; then
      echo "$file:$line: $target (no such file)"
      broken=$((broken + 1))
      continue
    fi
    if [ -n "$fragment" ]; then
      if [[ "$resolved" != *.md ]] || ! anchors "$resolved" | grep -qxF -- "$fragment"; then
        echo "$file:$line: $target (no heading with that anchor)"
        broken=$((broken + 1))
      fi
    fi
  done < <(awk '/^```/ { fence = !fence; next }
    !fence {
      s = $0
      gsub(/`[^`]*`/, "", s)
      while (match(s, /\]\([^)]+\)/)) {
        printf "%d\t%s\n", NR, substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
      }
    }' "$file")
done

echo "check-doc-links: ${#files[@]} Markdown files, $checked links, $broken broken"
[ "$broken" -eq 0 ]
