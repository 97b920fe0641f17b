#!/usr/bin/env bash
# keras_survey.sh: how many real Keras files load, over Eclipse Deeplearning4j's Keras import test
# resources (github.com/KonduitAI/dl4j-test-resources, Apache-2.0): every .h5 file under 200 KB
# below src/main/resources/modelimport/keras that holds a model_config (a whole model; 584 files at
# commit e95182762844), each loaded by the keras_survey tool (tnt_load_model, then one forward
# pass on zeros). Prints the count, then the failures grouped by their message with the numbers,
# names and quoted values taken out.
#
#   scripts/keras_survey.sh DL4J_GIT_DIR BUILD_DIR [OUT_DIR]
# DL4J_GIT_DIR: a clone (or bare git directory) of dl4j-test-resources; the files are read from its
# HEAD with git show. OUT_DIR (default /tmp/keras_survey) receives the files and results.txt.
set -euo pipefail
repo=${1:?usage: keras_survey.sh DL4J_GIT_DIR BUILD_DIR [OUT_DIR]}
build=${2:?usage: keras_survey.sh DL4J_GIT_DIR BUILD_DIR [OUT_DIR]}
out=${3:-/tmp/keras_survey}
tool="$build/tests/keras_survey"
[ -x "$tool" ] || { echo "keras_survey.sh: $tool not built (cmake --build $build --target keras_survey)" >&2; exit 1; }
mkdir -p "$out/files"
git -C "$repo" ls-tree -r -l HEAD -- src/main/resources/modelimport/keras |
    awk '$4 < 204800 && $5 ~ /\.h5$/ {print $5}' | while read -r p; do
    f="$out/files/$(echo "${p#src/main/resources/modelimport/keras/}" | tr / _)"
    [ -s "$f" ] || git -C "$repo" show "HEAD:$p" > "$f"
done
# whole models only: the files that hold a model_config attribute (h5py, or h5dump as a fallback)
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    /usr/bin/python3 - "$out/files" > "$out/models.txt" <<'EOF'
import glob, sys, h5py
for f in sorted(glob.glob(sys.argv[1] + '/*.h5')):
    try:
        with h5py.File(f, 'r') as h:
            if 'model_config' in h.attrs: print(f)
    except OSError:
        pass
EOF
else
    for f in "$out"/files/*.h5; do h5dump -A -a /model_config "$f" >/dev/null 2>&1 && echo "$f"; done > "$out/models.txt"
fi
xargs -a "$out/models.txt" -d '\n' "$tool" > "$out/results.txt" 2>/dev/null
total=$(wc -l < "$out/results.txt")
ok=$(grep -c '^OK ' "$out/results.txt" || true)
echo "$ok of $total whole-model files load and predict"
grep '^FAIL ' "$out/results.txt" | sed -E 's/^FAIL [^:]*: //; s/^load_(model|weights) [^:]*: //; s/"[^"]*"/"_"/g; s/[0-9]+/N/g' | sort | uniq -c | sort -rn
