#!/usr/bin/env bash
# tnt-train end to end. A compiled Keras model file (fixtures/compiled_autoencoder.h5: mse, Adam
# 0.005 with its state, metric mean_absolute_error) trains with its own configuration and gives
# the losses of the C API's tnt_load_model + tnt_fit (FIT, tests/tools/fit_model_file.c) on 1 and
# 2 ranks; flags override it; a two-output file's loss_weights (fixtures/compiled_two_outputs.h5)
# train as the C API's tnt_compile with the same weights; a Keras JSON model trained on synthetic data and on Fashion-MNIST,
# alone and on 2 ranks (the same figures), read back by tnt-predict; a NaN loss stops training
# (--terminate_on_nan) with exit 1 and no saved file; bad usage exits 2 and failures 1, naming the
# bad value. Run by ctest from tests/ with the build's bin/ and FIT.
set -u
BIN=$1
FIT=$2
dir=$(mktemp -d /tmp/tnt_train_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
# the CSV rows of two runs agree to a relative 1e-6 (and have the same columns)
same_csv() { [ -s "$1" ] && [ "$(head -1 "$1")" = "$(head -1 "$2")" ] && paste -d, "$1" "$2" | awk -F, '
  NR > 1 { n = NF / 2; for (i = 2; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d
           a = $i < 0 ? -$i : $i; if (d > 1e-6 * (a > 1 ? a : 1)) bad = 1 } rows++ }
  END { exit bad || rows < 1 }'; }
export OMP_NUM_THREADS=1
PY=/usr/bin/python3

# ---- a compiled model file: its own loss, optimizer (with its state) and metrics ----------------
ae=fixtures/compiled_autoencoder.h5
$PY -c "import numpy as np; np.save('$dir/ax.npy', np.random.default_rng(1).standard_normal((100, 12)).astype(np.float32))"
"$BIN/tnt-train" $ae --data npy:"$dir/ax.npy" --target input --epochs 2 --csv_log "$dir/t1.csv" > "$dir/t1.log" 2>&1
rc1=$?
"$FIT" $ae "$dir/ax.npy" 2 32 42 "$dir/f1.csv" > "$dir/f1.log" 2>&1
rc2=$?
check "compiled model: tnt-train and the C API exit 0" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
check "the plan names the file's loss, optimizer with its rate and state, metrics" '
  grep -q "loss *mean_squared_error (from the model file)" "$dir/t1.log" &&
  grep -q "optimizer *Adam, learning rate 0.005, iteration 30 (from the model file)" "$dir/t1.log" &&
  grep -q "metrics *mean_absolute_error (from the model file)" "$dir/t1.log" &&
  grep -q "100 training samples of (12,), targets (12,) (the inputs)" "$dir/t1.log" &&
  grep -q "ranks *1; batch 32 global, 32 per rank" "$dir/t1.log"'
check "1 rank: the losses of load_model + fit (1e-6)" 'same_csv "$dir/t1.csv" "$dir/f1.csv"'
"$BIN/tarantella" -n 2 -- "$BIN/tnt-train" $ae --data npy:"$dir/ax.npy" --target input --epochs 2 \
  --csv_log "$dir/t2.csv" > "$dir/t2.log" 2>&1
"$BIN/tarantella" -n 2 -- "$FIT" $ae "$dir/ax.npy" 2 32 42 "$dir/f2.csv" > /dev/null 2>&1
check "2 ranks: the losses of load_model + fit (1e-6), 16 samples per rank" '
  same_csv "$dir/t2.csv" "$dir/f2.csv" && grep -q "ranks *2; batch 32 global, 16 per rank" "$dir/t2.log"'

"$BIN/tnt-train" $ae --data npy:"$dir/ax.npy" --target input --epochs 2 --optimizer sgd --learning_rate 0.1 \
  --csv_log "$dir/sgd.csv" > "$dir/sgd.log" 2>&1
check "--optimizer sgd --learning_rate 0.1 changes the plan and the losses" '
  grep -q "optimizer *SGD, learning rate 0.1, iteration 0 (--optimizer and --learning_rate)" "$dir/sgd.log" &&
  grep -q "loss *mean_squared_error (from the model file)" "$dir/sgd.log" && ! same_csv "$dir/sgd.csv" "$dir/t1.csv"'
"$BIN/tnt-train" $ae --data npy:"$dir/ax.npy" --target input --learning_rate 0.05 --loss mean_absolute_error \
  --metrics none --verbose 2 > "$dir/lr.log" 2>&1
check "--learning_rate alone keeps the optimizer's state; --loss and --metrics override" '
  grep -q "Adam, learning rate 0.05, iteration 30 (from the model file, --learning_rate)" "$dir/lr.log" &&
  grep -q "loss *mean_absolute_error (--loss)" "$dir/lr.log" && grep -q "metrics *none (--metrics)" "$dir/lr.log" &&
  ! grep -q "mean_absolute_error:" "$dir/lr.log"'
"$BIN/tnt-train" $ae --data synthetic:50 --validation_split 0.2 --epochs 1 --csv_log "$dir/vs.csv" \
  --save "$dir/ae2.h5" > "$dir/vs.log" 2>&1
check "synthetic regression targets, --validation_split takes the last 20%, --save writes .h5" '
  grep -q "40 training samples of (12,), targets (12,)$" "$dir/vs.log" &&
  grep -q "validation *the last 10 samples" "$dir/vs.log" && grep -q val_loss "$dir/vs.csv" && [ -s "$dir/ae2.h5" ]'
# NaN in sample 40, which the shuffle of seed 42 puts in batch 0 of 4: TerminateOnNaN stops after
# that batch (the bar ends at 1/4) and nothing is saved
$PY -c "import numpy as np; x = np.load('$dir/ax.npy'); x[40, 0] = np.nan; np.save('$dir/nan.npy', x)"
for ranks in 1 2; do
  "$BIN/tarantella" -n $ranks -- "$BIN/tnt-train" $ae --data npy:"$dir/nan.npy" --target input --epochs 3 \
    --save "$dir/nan$ranks.h5" > "$dir/nan$ranks.log" 2>&1; rc=$?
  check "NaN loss, $ranks rank(s): stops after batch 0, exit 1, no --save file" '[ $rc -eq 1 ] && [ ! -e "$dir/nan$ranks.h5" ] &&
    grep -q "Batch 0: Invalid loss, terminating training" "$dir/nan$ranks.log" && grep -q "^1/4 \[" "$dir/nan$ranks.log" &&
    grep -q "training stopped in epoch 1: the loss is nan; the model is not saved" "$dir/nan$ranks.log" &&
    ! grep -q "Epoch 2/3" "$dir/nan$ranks.log"'
done
"$BIN/tnt-train" $ae --data npy:"$dir/nan.npy" --target input --epochs 3 --terminate_on_nan 0 --save "$dir/nan0.h5" \
  > "$dir/nan0.log" 2>&1; rc=$?
check "--terminate_on_nan 0: all 3 epochs, exit 0, saved" '[ $rc -eq 0 ] && [ -s "$dir/nan0.h5" ] &&
  grep -q "Epoch 3/3" "$dir/nan0.log" && ! grep -q "Invalid loss" "$dir/nan0.log"'
"$BIN/tnt-train" "$dir/ae2.h5" --data synthetic:8 --verbose 1 > "$dir/re.log" 2>&1
check "the saved model trains on from its state" 'grep -q "Adam, learning rate 0.005, iteration 32 " "$dir/re.log"'
"$BIN/tnt-train" $ae --data synthetic:16 --loss sparse_categorical_crossentropy > "$dir/e.log" 2>&1; rc=$?
check "--loss whose kind the file's metrics do not fit: exit 1 naming the metric" '
  [ $rc -eq 1 ] && grep -q "metric \"mean_absolute_error\" needs one label per output" "$dir/e.log"'
for loss in binary_crossentropy categorical_crossentropy sparse_categorical_crossentropy; do
  "$BIN/tnt-train" $ae --data synthetic:16 --loss $loss --metrics none --verbose 0 > "$dir/k.log" 2>&1
  check "synthetic targets fit $loss" '[ $? -eq 0 ]'
done

# ---- a Keras JSON model (no training configuration) ----------------------------------------------
model=fixtures/keras_cnn.json
"$BIN/tnt-train" $model --data synthetic:8 > "$dir/e.log" 2>&1; rc=$?
check "a JSON model without --loss: exit 2 saying what to give" '[ $rc -eq 2 ] && grep -q "no training configuration.*give --loss and --optimizer" "$dir/e.log"'
"$BIN/tnt-train" $model --data synthetic:8 --loss mse > "$dir/e.log" 2>&1; rc=$?
check "a JSON model without --optimizer: exit 2" '[ $rc -eq 2 ] && grep -q "give --optimizer" "$dir/e.log"'

# ---- loss_weights: a two-output file compiled with loss_weights {"out_a": 2, "out_b": 0.5} -------
two=fixtures/compiled_two_outputs.h5
$PY -c "import numpy as np; r = np.random.default_rng(3)
np.save('$dir/tx.npy', r.standard_normal((96, 12)).astype(np.float32))
np.save('$dir/ty.npy', r.standard_normal((96, 7)).astype(np.float32))"
# the same file with no loss_weights: the C API gives them to tnt_compile
cp $two "$dir/two_nw.h5"
$PY -c 'import h5py, json, sys
with h5py.File(sys.argv[1], "r+") as f:
    tc = json.loads(f.attrs["training_config"]); tc["loss_weights"] = None
    f.attrs["training_config"] = json.dumps(tc)' "$dir/two_nw.h5"
# loss = 2 out_a_loss + 0.5 out_b_loss in every row (relative 1e-6); the columns are named
weighted() { awk -F, -v wa="$2" -v wb="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; ok = c["loss"] && c["out_a_loss"] && c["out_b_loss"]; next }
  { d = $c["loss"] - (wa * $c["out_a_loss"] + wb * $c["out_b_loss"]); if (d < 0) d = -d; if (d > 1e-6 * $c["loss"]) ok = 0; rows++ }
  END { exit !(ok && rows > 0) }' "$1"; }
for ranks in 1 2; do
  "$BIN/tarantella" -n $ranks -- "$BIN/tnt-train" $two --data npy:"$dir/tx.npy","$dir/ty.npy" --epochs 2 \
    --csv_log "$dir/lw$ranks.csv" > "$dir/lw$ranks.log" 2>&1; rc1=$?
  "$BIN/tarantella" -n $ranks -- "$FIT" "$dir/two_nw.h5" "$dir/tx.npy" 2 32 42 "$dir/lwf$ranks.csv" "$dir/ty.npy" 2,0.5 \
    > "$dir/lwf$ranks.log" 2>&1; rc2=$?
  check "loss_weights of the file, $ranks rank(s): tnt-train gives the C API's losses with weights 2, 0.5 (1e-6)" '
    [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && same_csv "$dir/lw$ranks.csv" "$dir/lwf$ranks.csv" && weighted "$dir/lw$ranks.csv" 2 0.5 &&
    grep -q "loss weights 2, 0.5 (from the model file)" "$dir/lw$ranks.log"'
done
"$BIN/tnt-train" $two --data npy:"$dir/tx.npy","$dir/ty.npy" --epochs 2 --loss_weights 1,3 --csv_log "$dir/lw13.csv" \
  --save "$dir/lw13.h5" > "$dir/lw13.log" 2>&1; rc=$?
check "--loss_weights 1,3 overrides the file's, is shown in the plan and saved" '[ $rc -eq 0 ] && weighted "$dir/lw13.csv" 1 3 &&
  grep -q "loss weights 1, 3 (--loss_weights)" "$dir/lw13.log" && ! same_csv "$dir/lw13.csv" "$dir/lw1.csv" &&
  $PY -c "import h5py, json, sys; sys.exit(json.loads(h5py.File(\"$dir/lw13.h5\").attrs[\"training_config\"])[\"loss_weights\"] != [1, 3])"'
"$BIN/tnt-train" "$dir/lw13.h5" --data synthetic:32 --epochs 1 > "$dir/lw13b.log" 2>&1
check "the saved file trains on with its loss_weights" '[ $? -eq 0 ] && grep -q "loss weights 1, 3 (from the model file)" "$dir/lw13b.log"'
"$BIN/tnt-train" $two --data synthetic:32 --loss_weights 1,2,3 > "$dir/e.log" 2>&1; rc=$?
check "--loss_weights with 3 values for 2 outputs: exit 1 naming the outputs" '[ $rc -eq 1 ] &&
  grep -q "loss_weights has 3 values, the model has 2 outputs (out_a, out_b)" "$dir/e.log" && ! grep -q Epoch "$dir/e.log"'
for bad in "-1,1" "1,x" "1,,2"; do
  "$BIN/tnt-train" $two --data synthetic:32 --loss_weights "$bad" > "$dir/e.log" 2>&1; rc=$?
  check "--loss_weights $bad: exit 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--loss_weights \"$bad\": expected up to 8 numbers >= 0" "$dir/e.log"'
done
cp $two "$dir/lwbad.h5"
$PY -c 'import h5py, json, sys
with h5py.File(sys.argv[1], "r+") as f:
    tc = json.loads(f.attrs["training_config"]); tc["loss_weights"] = {"out_a": 1.0, "out_c": 2.0}
    f.attrs["training_config"] = json.dumps(tc)' "$dir/lwbad.h5"
"$BIN/tnt-train" "$dir/lwbad.h5" --data synthetic:32 > "$dir/e.log" 2>&1; rc=$?
check "a file whose loss_weights name an unknown output: exit 1 naming it and the outputs" '[ $rc -eq 1 ] &&
  grep -q "loss_weights names \"out_c\", which is not an output of model \"two_outputs\" (its outputs: out_a, out_b)" "$dir/e.log"'
$PY -c 'import h5py, json, sys
with h5py.File(sys.argv[1], "r+") as f:
    tc = json.loads(f.attrs["training_config"]); tc["loss_weights"] = [2.0, -0.5]
    f.attrs["training_config"] = json.dumps(tc)' "$dir/lwbad.h5"
"$BIN/tnt-train" "$dir/lwbad.h5" --data synthetic:32 > "$dir/e.log" 2>&1; rc=$?
check "a file with a negative loss weight: exit 1 naming it" '[ $rc -eq 1 ] &&
  grep -q "loss_weights\[1\] (output out_b) is -0.5: expected a finite number >= 0" "$dir/e.log"'
json=(--loss sparse_categorical_crossentropy --optimizer sgd --learning_rate 0.01)
"$BIN/tnt-train" $model "${json[@]}" --data synthetic:64 --epochs 2 --batch_size 16 --verbose 2 --save "$dir/s.h5" > "$dir/s.log" 2>&1
check "synthetic class labels: exit 0 and saves" '[ $? -eq 0 ] && [ -s "$dir/s.h5" ] && grep -q "targets (1,)" "$dir/s.log"'

common=(--data fashion-mnist --num_samples 1024 --epochs 2 --batch_size 64 --loss sparse_categorical_crossentropy
        --optimizer adam --learning_rate 1e-3 --verbose 2 --metrics accuracy)
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
check "master saved the model" '[ -s "$dir/two.h5" ]'

# the saved model predicts through tnt-predict, with the JSON + its weights or as a whole file,
# silently unless --verbose
$PY -c "import numpy; numpy.save('$dir/x.npy', numpy.zeros((5, 28, 28, 1), numpy.float32))" &&
  "$BIN/tnt-predict" $model "$dir/x.npy" "$dir/y1.npy" --weights "$dir/two.h5" > "$dir/p1.log" 2>&1 &&
  "$BIN/tnt-predict" "$dir/two.h5" "$dir/x.npy" "$dir/y2.npy" --verbose > "$dir/p2.log" 2>&1
check "tnt-predict reads tnt-train's model both ways, with equal rows" 'cmp -s "$dir/y1.npy" "$dir/y2.npy" && [ -s "$dir/y1.npy" ]'
check "tnt-predict prints nothing unless --verbose" '[ ! -s "$dir/p1.log" ] && grep -q "shape (5, 10), to" "$dir/p2.log"'

# ---- bad usage and failures ---------------------------------------------------------------------
"$BIN/tnt-train" > /dev/null 2>&1; check "no arguments: exit 2" '[ $? -eq 2 ]'
for bad in "--epochs zero" "--epochs 1e12" "--batch_size 1e30" "--epochs 2.5" "--batch_size 0" "--epochs 99999999999999999999"; do
  "$BIN/tnt-train" $ae --data synthetic:8 $bad > "$dir/e.log" 2>&1; rc=$?
  check "$bad: exit 2 naming the value and the range" '[ $rc -eq 2 ] && grep -q "\"${bad#* }\": expected an integer from 1 to" "$dir/e.log"'
done
"$BIN/tnt-train" $ae --data synthetic:100000000000 > "$dir/e.log" 2>&1; rc=$?
check "synthetic:100000000000: exit 1 naming it" '[ $rc -eq 1 ] && grep -q "\"synthetic:100000000000\": expected synthetic:N with N an integer from 1 to" "$dir/e.log"'
"$BIN/tnt-train" $ae --data synthetic:8 --learning_rate -1 > "$dir/e.log" 2>&1; rc=$?
check "negative --learning_rate: exit 2" '[ $rc -eq 2 ] && grep -q "\"-1\": expected a number > 0" "$dir/e.log"'
"$BIN/tnt-train" $ae --data synthetic:8 --validation_split 1 > "$dir/e.log" 2>&1; rc=$?
check "--validation_split 1: exit 2" '[ $rc -eq 2 ] && grep -q "validation_split \"1\"" "$dir/e.log"'
"$BIN/tnt-train" $ae --data synthetic:8 --loss nope > "$dir/e.log" 2>&1; rc=$?
check "bad --loss: exit 2 naming it" '[ $rc -eq 2 ] && grep -q "\"nope\"" "$dir/e.log"'
"$BIN/tnt-train" $ae --data synthetic:8 --optimizer nope > /dev/null 2>&1; check "bad --optimizer: exit 2" '[ $? -eq 2 ]'
"$BIN/tnt-train" "$dir/ae2.h5" --data synthetic:8 --save "$dir/ae3.keras" > "$dir/k.log" 2>&1; rc=$?
check "--save NAME.keras writes a Keras 3 zip" '[ $rc -eq 0 ] && [ "$(head -c 4 "$dir/ae3.keras")" = "$(printf "PK\003\004")" ]'
cp "$dir/ae3.keras" "$dir/ae3_named.h5"
"$BIN/tnt-train" "$dir/ae3_named.h5" --data synthetic:8 --verbose 1 > "$dir/k2.log" 2>&1
check "a .keras file (told by content, not name) trains on from its state" '
  [ $? -eq 0 ] && grep -q "Adam, learning rate 0.005, iteration 33 " "$dir/k2.log"'
$PY -c "import numpy; numpy.save('$dir/ax5.npy', numpy.ones((5, 12), numpy.float32))" &&
  "$BIN/tnt-predict" "$dir/ae3.keras" "$dir/ax5.npy" "$dir/k3.npy" > "$dir/p3.log" 2>&1
check "tnt-predict reads a .keras file" '[ $? -eq 0 ] && [ -s "$dir/k3.npy" ]'
printf 'GARBAGE!' > "$dir/bad.keras"
"$BIN/tnt-predict" "$dir/bad.keras" "$dir/ax5.npy" "$dir/k4.npy" > "$dir/e.log" 2>&1; rc=$?
check "tnt-predict: an unknown format exits 1 naming the magic" '[ $rc -eq 1 ] && grep -q "unknown file format (first bytes 47 41" "$dir/e.log" && [ ! -e "$dir/k4.npy" ]'
"$BIN/tnt-train" $ae --data synthetic:8 --save /nonexistent/dir/out.h5 > "$dir/e.log" 2>&1; rc=$?
check "an unwritable --save fails before training" '[ $rc -eq 1 ] && grep -q "/nonexistent/dir/out.h5: cannot write there" "$dir/e.log" &&
  ! grep -q "Epoch" "$dir/e.log"'
sed 's/"name": "dense"/"name": "a\/b"/' $model > "$dir/slash.json"
"$BIN/tnt-train" "$dir/slash.json" "${json[@]}" --data synthetic:8 --save "$dir/slash.h5" > "$dir/e.log" 2>&1; rc=$?
check "a layer named a/b with --save fails before training, naming it" '[ $rc -eq 1 ] &&
  grep -q "tnt-train: --save: save_model $dir/slash.h5: layer name \"a/b\" cannot be saved" "$dir/e.log" &&
  ! grep -q "Epoch" "$dir/e.log" && [ ! -e "$dir/slash.h5" ]'
"$BIN/tnt-train" $ae --data npy:"$dir/ax.npy" > "$dir/e.log" 2>&1; rc=$?
check "npy data without targets: exit 1 pointing to --target input" '[ $rc -eq 1 ] && grep -q "has no targets.*--target input" "$dir/e.log"'
"$BIN/tnt-train" $model --data nope:1 "${json[@]}" > "$dir/e.log" 2>&1; rc=$?
check "bad --data: exit 1 naming it" '[ $rc -eq 1 ] && grep -q "nope:1" "$dir/e.log"'
"$BIN/tnt-train" $model "${json[@]}" --data npy:/nonexistent.npy,/nonexistent2.npy > "$dir/e.log" 2>&1; rc=$?
check "missing npy: exit 1" '[ $rc -eq 1 ] && grep -q nonexistent "$dir/e.log"'
"$BIN/tnt-train" fixtures/keras_transformer.json "${json[@]}" --data idx:/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz,/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz > "$dir/e.log" 2>&1; rc=$?
check "data that does not fit the model: exit 1" '[ $rc -eq 1 ] && grep -q "do not fit" "$dir/e.log"'

# ---- None dimensions and several inputs (issue 11) ----------------------------------------------
$PY -c "
import numpy as np
r = np.random.default_rng(1)
np.save('$dir/s5.npy', r.standard_normal((6, 5, 3)).astype('float32')); np.save('$dir/t5.npy', r.standard_normal((6, 5, 4)).astype('float32'))
np.save('$dir/s9.npy', r.standard_normal((4, 9, 3)).astype('float32'))
np.save('$dir/l.npy', r.standard_normal((6, 4)).astype('float32')); np.save('$dir/r.npy', r.standard_normal((6, 4)).astype('float32'))
np.save('$dir/y3.npy', r.standard_normal((6, 3)).astype('float32'))"
"$BIN/tnt-train" fixtures/keras3_real/tfkeras_rnn_172.h5 --loss mse --optimizer adam --data npy:"$dir/s5.npy","$dir/t5.npy" \
  --batch_size 3 --save "$dir/var.keras" > "$dir/v.log" 2>&1 &&
  "$BIN/tnt-predict" "$dir/var.keras" "$dir/s9.npy" "$dir/v9.npy" > /dev/null 2>&1
check "a model with None steps trains on length 5, predicts on length 9" '[ $? -eq 0 ] &&
  $PY -c "import numpy; assert numpy.load(\"$dir/v9.npy\").shape == (4, 9, 4)"'
"$BIN/tnt-train" fixtures/keras3_real/tfkeras_rnn_172.h5 --loss mse --optimizer adam --data synthetic:8 > "$dir/e.log" 2>&1; rc=$?
check "synthetic data for None dimensions: exit 1 saying why" '[ $rc -eq 1 ] && grep -q "variable (None) dimensions" "$dir/e.log"'
"$BIN/tnt-train" fixtures/keras3_real/nested_siamese_tfkeras.h5 --loss mse --optimizer sgd \
  --data npy:right="$dir/r.npy"+left="$dir/l.npy","$dir/y3.npy" --batch_size 3 > "$dir/n.log" 2>&1
check "two inputs by name (a nested model in between)" '[ $? -eq 0 ] && grep -q "loss:" "$dir/n.log"'
"$BIN/tnt-train" fixtures/keras3_real/nested_siamese_tfkeras.h5 --loss mse --optimizer sgd \
  --data npy:left="$dir/l.npy","$dir/y3.npy" > "$dir/e.log" 2>&1; rc=$?
check "a missing input: exit 1 naming the inputs" '[ $rc -eq 1 ] && grep -q "(left, right)" "$dir/e.log"'
exit $fails
