# Sourced by scripts/setup.sh, scripts/lock.sh and benchmarks/peers/setup_infinity.sh: where pip and uv
# find torch's CPU build (2.13.0+cpu, which PyPI does not have): TORCH_FIND_LINKS if set, else
# /opt/wheels where that folder holds the wheel, else PyTorch's CPU index page.
if [ -z "${TORCH_FIND_LINKS:-}" ]; then
  TORCH_FIND_LINKS=https://download.pytorch.org/whl/cpu/torch/
  if compgen -G "/opt/wheels/torch-2.13.0+cpu-*.whl" >/dev/null; then
    TORCH_FIND_LINKS=/opt/wheels
  fi
fi
