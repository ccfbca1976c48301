# Sourced by the environment scripts: torch_venv VENV makes (or reuses) a venv with a current pip and the
# pinned CPU torch, installed first so that nothing later resolves a CUDA build.
torch_venv() {
    local venv="$1"
    [[ -x "$venv/bin/python" ]] || "${PYTHON:-python3.11}" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q "torch==2.13.0"
}
