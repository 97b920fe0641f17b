#!/usr/bin/env bash
# tnt-train end to end: a Keras JSON model trained on synthetic data and on Fashion-MNIST, alone
# and on 2 ranks through the launcher (the same figures as 1 rank), its saved weights read by
# tnt-predict; bad usage exits 2 and failures 1. Run by ctest from tests/ with the build's bin/.
set -u
BIN=$1
dir=$(mktemp -d /tmp/tnt_train_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
model=fixtures/keras_cnn.json

"$BIN/tnt-train" $model --data synthetic:64 --epochs 2 --batch_size 16 --verbose 2 --save "$dir/s.h5" > "$dir/s.log" 2>&1
check "synthetic run exits 0 and saves" '[ $? -eq 0 ] && [ -s "$dir/s.h5" ]'

common=(--data fashion-mnist --num_samples 1024 --epochs 2 --batch_size 64 --optimizer adam
        --learning_rate 1e-3 --verbose 2 --metrics accuracy)
"$BIN/tnt-train" $model "${common[@]}" --save "$dir/one.h5" > "$dir/one.log" 2>&1
rc1=$?
"$BIN/tarantella" -n 2 -- "$BIN/tnt-train" $model "${common[@]}" --save "$dir/two.h5" > "$dir/two.log" 2>&1
rc2=$?
check "fashion-mnist on 1 and 2 ranks exit 0" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
# the epoch figures (printed to 4 decimals) equal the serial ones up to the last digit's rounding
l1=$(grep -o 'loss: [0-9.]* - accuracy: [0-9.]*' "$dir/one.log")
l2=$(grep -o 'loss: [0-9.]* - accuracy: [0-9.]*' "$dir/two.log")
check "2 ranks print the serial figures" '[ -n "$l1" ] && paste <(echo "$l1") <(echo "$l2") |
  awk "{ if (\$2 - \$7 > 2e-4 || \$7 - \$2 > 2e-4 || \$5 - \$10 > 2e-4 || \$10 - \$5 > 2e-4) bad = 1 } END { exit bad }"'
check "the loss falls" 'awk "NR==1{a=\$2} NR==2{b=\$2} END{exit !(b < a)}" <<< "$l1"'
check "master saved the weights" '[ -s "$dir/two.h5" ]'

# the saved model predicts through tnt-predict, with the JSON + its weights or as a whole file
/usr/bin/python3 -c "import numpy; numpy.save('$dir/x.npy', numpy.zeros((5, 28, 28, 1), numpy.float32))" 2>/dev/null &&
  "$BIN/tnt-predict" $model "$dir/x.npy" "$dir/y1.npy" --weights "$dir/two.h5" > /dev/null 2>&1 &&
  "$BIN/tnt-predict" "$dir/two.h5" "$dir/x.npy" "$dir/y2.npy" > /dev/null 2>&1
check "tnt-predict reads tnt-train's model both ways, with equal rows" 'cmp -s "$dir/y1.npy" "$dir/y2.npy" && [ -s "$dir/y1.npy" ]'
# and training goes on from the saved .h5
"$BIN/tnt-train" "$dir/two.h5" --data synthetic:32 --epochs 1 --batch_size 16 --verbose 0 > /dev/null 2>&1
check "tnt-train continues from a .h5 model" '[ $? -eq 0 ]'

"$BIN/tnt-train" > /dev/null 2>&1; check "no arguments: exit 2" '[ $? -eq 2 ]'
"$BIN/tnt-train" $model --data synthetic:8 --epochs zero > /dev/null 2>&1; check "bad --epochs: exit 2" '[ $? -eq 2 ]'
"$BIN/tnt-train" $model --data synthetic:8 --loss nope > /dev/null 2>&1; check "bad --loss: exit 2" '[ $? -eq 2 ]'
"$BIN/tnt-train" $model --data nope:1 > "$dir/e.log" 2>&1; rc=$?
check "bad --data: exit 1 naming it" '[ $rc -eq 1 ] && grep -q "nope:1" "$dir/e.log"'
"$BIN/tnt-train" $model --data npy:/nonexistent.npy,/nonexistent2.npy > "$dir/e.log" 2>&1; rc=$?
check "missing npy: exit 1" '[ $rc -eq 1 ] && grep -q nonexistent "$dir/e.log"'
"$BIN/tnt-train" fixtures/keras_transformer.json --data idx:/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz,/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz > "$dir/e.log" 2>&1; rc=$?
check "data that does not fit the model: exit 1" '[ $rc -eq 1 ] && grep -q "do not fit" "$dir/e.log"'
exit $fails
