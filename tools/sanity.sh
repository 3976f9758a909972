#!/usr/bin/env bash
# ansible-test sanity against an ansible_collections/aorta/cluster view of the tracked files
# (ansible-test insists on that path; only files git tracks are checked).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# SANITY_VENV: a venv holding another ansible-core release (make sanity runs each maintained one).
bin="$repo/${SANITY_VENV:-.venv}/bin"
view="$repo/build/sanity/ansible_collections/aorta/cluster"

# ansible-test fetches a pip bootstrap script from the internet unless a cached copy exists.
# The pip version ansible-test pins names the cache file it looks for.
pip_version=$(grep -oP "pip='\K[0-9.]+" "$("$bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -n1)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cmp -s "$repo/tools/get_pip_offline.py" "$cache" || cp "$repo/tools/get_pip_offline.py" "$cache"

rm -rf "$view"
mkdir -p "$view"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$view/")
cd "$view"
git init -q . && git add -A >/dev/null
python_version=$("$bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$bin/ansible-test" sanity --local --python "$python_version" --requirements --color no "$@"
