#!/usr/bin/env bash
# keras_survey.sh: how many real Keras files load, over Eclipse Deeplearning4j's Keras import test
# resources (or, with --files, over a folder of files gathered elsewhere) (github.com/KonduitAI/dl4j-test-resources, Apache-2.0): every .h5 file under 200 KB
# below src/main/resources/modelimport/keras that holds a model_config (a whole model; 584 files at
# commit e95182762844), each loaded by the keras_survey tool (tnt_load_model, then one forward
# pass on zeros). Prints the count, then the failures grouped by their message with the numbers,
# names and quoted values taken out.
#
#   scripts/keras_survey.sh DL4J_GIT_DIR BUILD_DIR [OUT_DIR]
#   scripts/keras_survey.sh --files DIR BUILD_DIR [OUT_DIR]
# DL4J_GIT_DIR: a clone (or bare git directory) of dl4j-test-resources; the files are read from its
# HEAD with git show. --files DIR: every file of DIR instead (.h5, .hdf5, .keras gathered from other
# repositories, as in issue 24's survey): the whole models among them are the HDF5 files with a
# model_config and the zips with a config.json, whatever their extension (a pickle named .h5 or
# .keras is no Keras file). OUT_DIR (default /tmp/keras_survey) receives results.txt.
set -euo pipefail
usage="usage: keras_survey.sh DL4J_GIT_DIR | --files DIR  BUILD_DIR [OUT_DIR]"
if [ "${1:-}" = --files ]; then
    files=${2:?$usage}
    shift 2
else
    repo=${1:?$usage}
    shift
fi
build=${1:?$usage}
out=${2:-/tmp/keras_survey}
tool="$build/tests/keras_survey"
[ -x "$tool" ] || { echo "keras_survey.sh: $tool not built (cmake --build $build --target keras_survey)" >&2; exit 1; }
mkdir -p "$out/files"
if [ -z "${files:-}" ]; then
    git -C "$repo" ls-tree -r -l HEAD -- src/main/resources/modelimport/keras |
        awk '$4 < 204800 && $5 ~ /\.h5$/ {print $5}' | while read -r p; do
        f="$out/files/$(echo "${p#src/main/resources/modelimport/keras/}" | tr / _)"
        [ -s "$f" ] || git -C "$repo" show "HEAD:$p" > "$f"
    done
    files="$out/files"
fi
# whole models only: HDF5 files that hold a model_config attribute (h5py, or h5dump as a fallback),
# zips that hold a config.json
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    /usr/bin/python3 - "$files" > "$out/models.txt" <<'EOF'
import glob, sys, zipfile, h5py
for f in sorted(glob.glob(sys.argv[1] + '/*')):
    try:
        with open(f, 'rb') as fh:
            head = fh.read(4)
        if head == b'PK\x03\x04':  # a zip from its first byte (a pickled model embeds one further in)
            if 'config.json' in zipfile.ZipFile(f).namelist(): print(f)
            continue
        with h5py.File(f, 'r') as h:
            if 'model_config' in h.attrs: print(f)
    except (OSError, zipfile.BadZipFile):
        pass
EOF
else
    for f in "$files"/*; do h5dump -A -a /model_config "$f" >/dev/null 2>&1 && echo "$f"; done > "$out/models.txt"
fi
xargs -a "$out/models.txt" -d '\n' "$tool" > "$out/results.txt" 2>/dev/null
total=$(wc -l < "$out/results.txt")
ok=$(grep -c '^OK ' "$out/results.txt" || true)
echo "$ok of $total whole-model files load and predict"
grep '^FAIL ' "$out/results.txt" | sed -E 's/^FAIL [^:]*: //; s/^load_(model|weights) [^:]*: //; s/"[^"]*"/"_"/g; s/[0-9]+/N/g' | sort | uniq -c | sort -rn
