#!/usr/bin/env bash
# Automatic restart, bitwise (issue 13 point 4). restart_prog (tests/tools/restart_prog.c) trains
# an MLP with Dropout and BatchNormalization for 4 epochs on 2 ranks with BackupAndRestore; one
# rank SIGKILLs itself in the middle of epoch 2; the launcher (--max-restarts 1) runs the job
# again, which resumes from the backup: every final weight is bitwise the unbroken run's (cmp).
# Also: backups at epoch ends only; --max-restarts 0 (no restart, the backup stays, a later run
# resumes from it); a backup of another model is refused, not loaded; a stop the user asks for
# (SIGTERM to the launcher) is not restarted; tnt-train --backup_dir through a kill -9.
# Every run is under `timeout`, so a hang fails instead of blocking.
#   test_restart.sh TARANTELLA RESTART_PROG BIN_DIR
set -u
TNT=$1
PROG=$2
BIN=$3
dir=$(mktemp -d /tmp/tnt_restart_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
run() { timeout -k 5 120 "$TNT" -n 2 "$@"; }

run -- "$PROG" "$dir/ref.npy" 4 5 32 - > "$dir/ref.log" 2>&1
check "the unbroken run (no backup) exits 0 and saves its weights" '[ $? -eq 0 ] && [ -s "$dir/ref.npy" ]'

# kill -9 of rank 1 at batch 7 of epoch 2: the backup of batch 5 of epoch 2 is the newest
t0=$(date +%s.%N)
run --max-restarts 1 -- "$PROG" "$dir/k.npy" 4 5 32 "$dir/bk" kill 1 1 7 "$dir/mark" > "$dir/k.log" 2>&1; rc=$?
t1=$(date +%s.%N)
check "rank 1 killed in epoch 2, one restart: exit 0, one notice, the weights bitwise the unbroken run's" '
  [ $rc -eq 0 ] && [ -e "$dir/mark" ] && grep -q "rank 1: kill at epoch 2, batch 7" "$dir/k.log" &&
  [ "$(grep -c "tarantella: the job failed (exit status [0-9]*); restarting it (restart 1 of at most 1)" "$dir/k.log")" = 1 ] &&
  cmp "$dir/k.npy" "$dir/ref.npy"'
check "the restarted job resumed in epoch 2 (3 epoch lines after the restart), the backup is removed" '
  [ "$(sed -n "/restarting it/,\$p" "$dir/k.log" | grep -c "^Epoch [234]/4")" = 3 ] &&
  ! sed -n "/restarting it/,\$p" "$dir/k.log" | grep -q "^Epoch 1/4" && [ ! -e "$dir/bk" ]'
echo "   (kill and restart: $(echo "$t1 - $t0" | bc) s in all)"

# backups at epoch ends only: the job resumes at the start of epoch 2
rm -f "$dir/mark"
run --max-restarts 2 -- "$PROG" "$dir/e.npy" 4 0 32 "$dir/be" kill 0 1 3 "$dir/mark" > "$dir/e.log" 2>&1; rc=$?
check "rank 0 killed, backups at epoch ends: exit 0, bitwise, one restart of at most 2" '
  [ $rc -eq 0 ] && cmp "$dir/e.npy" "$dir/ref.npy" && grep -q "restart 1 of at most 2" "$dir/e.log" &&
  ! grep -q "restart 2 of" "$dir/e.log"'

# no --max-restarts: the job fails and keeps its backup; another model does not load it; the same
# model, run again, resumes from it
rm -f "$dir/mark"
run -- "$PROG" "$dir/n.npy" 4 3 32 "$dir/bn" kill 1 2 4 "$dir/mark" > "$dir/n.log" 2>&1; rc=$?
check "no --max-restarts: the killed job exits nonzero, not restarted, the backup stays" '
  [ $rc -ne 0 ] && ! grep -q "restarting it" "$dir/n.log" && [ -s "$dir/bn/backup.tnt" ] && [ ! -e "$dir/n.npy" ]'
cp "$dir/bn/backup.tnt" "$dir/backup.keep"
run -- "$PROG" "$dir/o.npy" 4 3 33 "$dir/bn" > "$dir/o.log" 2>&1; rc=$?
check "a backup of another model (Dense 32 there, 33 here) is refused by name and shapes, not loaded" '
  [ $rc -eq 1 ] && grep -q "backup.tnt is of another model: its weight 0 is \"dense[_0-9]*/kernel:0\" (20, 32), model \"restart_mlp\" has \"dense[_0-9]*/kernel:0\" (20, 33); not loaded" "$dir/o.log" &&
  ! grep -q "^Epoch" "$dir/o.log" && cmp -s "$dir/bn/backup.tnt" "$dir/backup.keep"'
head -c 200 "$dir/backup.keep" > "$dir/bn/backup.tnt"
run -- "$PROG" "$dir/o.npy" 4 3 32 "$dir/bn" > "$dir/t.log" 2>&1; rc=$?
check "a truncated backup is refused, naming it" '[ $rc -eq 1 ] && grep -q "backup.tnt: .*truncated or damaged" "$dir/t.log"'
cp "$dir/backup.keep" "$dir/bn/backup.tnt"
printf '\x5a' | dd of="$dir/bn/backup.tnt" bs=1 seek=$(( $(stat -c %s "$dir/backup.keep") - 100 )) conv=notrunc 2> /dev/null
run -- "$PROG" "$dir/o.npy" 4 3 32 "$dir/bn" > "$dir/t.log" 2>&1; rc=$?
check "a backup with a flipped byte in its values is refused (checksum)" '[ $rc -eq 1 ] &&
  grep -q "backup.tnt: checksum mismatch: the file is damaged; not loaded" "$dir/t.log"'
cp "$dir/backup.keep" "$dir/bn/backup.tnt"
run -- "$PROG" "$dir/n.npy" 4 3 32 "$dir/bn" > "$dir/n2.log" 2>&1; rc=$?
check "run again by hand, the job resumes from the backup: bitwise the unbroken run's" '
  [ $rc -eq 0 ] && cmp "$dir/n.npy" "$dir/ref.npy" && ! grep -q "^Epoch [12]/4" "$dir/n2.log" && [ ! -e "$dir/bn" ]'

# one process, no launcher: killed in epoch 3, run again, bitwise the unbroken 1-rank run
rm -f "$dir/mark"
timeout 120 "$PROG" "$dir/ref1.npy" 4 5 32 - > /dev/null 2>&1
rc=$( (timeout 120 "$PROG" "$dir/one.npy" 4 5 32 "$dir/b1" kill 0 2 9 "$dir/mark" > /dev/null 2>&1); echo $?)
timeout 120 "$PROG" "$dir/one.npy" 4 5 32 "$dir/b1" kill 0 2 9 "$dir/mark" > "$dir/one.log" 2>&1
check "one process: killed (137), run again, resumes in epoch 3, bitwise" '[ $rc -eq 137 ] && [ -s "$dir/ref1.npy" ] &&
  cmp "$dir/one.npy" "$dir/ref1.npy" && ! grep -q "^Epoch [12]/4" "$dir/one.log" && grep -q "^Epoch 3/4" "$dir/one.log"'

# a stop the user asks for is no failure to restart from: SIGTERM to the launcher
rm -f "$dir/mark"
"$TNT" -n 2 --max-restarts 3 -- "$PROG" "$dir/s.npy" 4 5 32 "$dir/bs" sleep 1 1 2 "$dir/mark" > "$dir/s.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$dir/mark" ] && break; sleep 0.1; done
kill -TERM $pid
for _ in $(seq 300); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
kill -9 $pid 2> /dev/null # only if it hung: the check below then fails
wait $pid; rc=$?
check "SIGTERM to the launcher: exit 143, no restart" '[ $rc -eq 143 ] && ! grep -q "restarting it" "$dir/s.log"'

# tnt-train --backup_dir: a rank killed (kill -9 from outside, once the first backup exists)
# while training; the restarted job gives the weights of an unbroken tnt-train run
model=fixtures/keras_mlp_functional.json
tt=(--data synthetic:4096 --epochs 8 --batch_size 32 --loss sparse_categorical_crossentropy --optimizer adam
    --learning_rate 1e-3 --verbose 2)
run -- "$BIN/tnt-train" $model "${tt[@]}" --save "$dir/tref.h5" > "$dir/tref.log" 2>&1
run --max-restarts 1 -- "$BIN/tnt-train" $model "${tt[@]}" --backup_dir "$dir/tb" --backup_freq 10 \
  --save "$dir/tk.h5" > "$dir/tk.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -e "$dir/tb/backup.tnt" ] && break; sleep 0.05; done
victim=$(pgrep -f "tnt-train $model" | while read -r p; do [ "$(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')")" = mpirun ] && echo "$p"; done | tail -1)
[ -n "$victim" ] && kill -9 "$victim"
wait $pid; rc=$?
npy() { /usr/bin/python3 -c 'import h5py, sys, numpy as np
f = h5py.File(sys.argv[1], "r")["model_weights"]; out = []
f.visititems(lambda n, d: out.append(np.asarray(d).tobytes()) if hasattr(d, "shape") else None)
sys.stdout.buffer.write(b"".join(out))' "$1" > "$2"; }
npy "$dir/tref.h5" "$dir/tref.bin" && npy "$dir/tk.h5" "$dir/tk.bin"
check "tnt-train --backup_dir: a rank killed, one restart, the saved weights bitwise the unbroken run's" '
  [ -n "$victim" ] && [ $rc -eq 0 ] && grep -q "restarting it (restart 1 of at most 1)" "$dir/tk.log" &&
  grep -q "backup .*tb, every 10 batches and at each epoch end" "$dir/tk.log" && [ -s "$dir/tk.bin" ] &&
  cmp "$dir/tk.bin" "$dir/tref.bin" && [ ! -e "$dir/tb" ]'
"$BIN/tnt-train" $model --data synthetic:8 --loss mse --optimizer sgd --backup_freq 3 > "$dir/e.log" 2>&1
check "--backup_freq without --backup_dir: exit 2" '[ $? -eq 2 ] && grep -q "backup_freq needs --backup_dir" "$dir/e.log"'
"$BIN/tnt-train" $model --data synthetic:8 --loss mse --optimizer sgd --backup_dir /proc/nope > "$dir/e.log" 2>&1
check "an unwritable --backup_dir fails before training" '[ $? -eq 1 ] && grep -q "backup_dir /proc/nope/backup.tnt: cannot create the directory /proc/nope" "$dir/e.log" &&
  ! grep -q "^Epoch" "$dir/e.log"'
"$TNT" --max-restarts -1 -- true > "$dir/e.log" 2>&1
check "--max-restarts -1: usage error" '[ $? -eq 2 ] && grep -q "for --max-restarts: expected an integer from 0" "$dir/e.log"'
exit $fails
