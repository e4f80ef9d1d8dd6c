# syntax=docker/dockerfile:1
# The service as a small image: the package and its dependencies, with the plots extra
# (matplotlib, for the PNG pictures), the grpc extra (the Open Inference Protocol over gRPC,
# as KServe's grpc-v2 clients call it) and the torch extra (the torch library engine:
# torch's CPU build, pinned, from PyTorch's CPU index; PyPI's Linux torch is the CUDA
# build), are built into wheels in one stage and installed from them alone, without build
# or test tools, into a slim runtime image.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip wheel --no-cache-dir --wheel-dir /wheels \
        --extra-index-url https://download.pytorch.org/whl/cpu ".[plots,grpc,torch]" "torch==2.13.0+cpu"

# HTTP on PE_PORT (8000 unless set, or Knative's PORT where that is set: no PE_PORT here, so
# that it can be), gRPC on PE_GRPC_PORT.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PE_HOST=0.0.0.0 \
    PE_GRPC_PORT=8081 \
    MPLCONFIGDIR=/home/pe/.config/matplotlib
RUN useradd --no-log-init --create-home --uid 10001 pe
COPY --from=build /wheels /wheels
# the one wheel of this package that the build stage made: its version is pyproject.toml's
RUN pip install --no-cache-dir --no-index --find-links /wheels \
        "$(echo /wheels/positional_encoding_service-*.whl)[plots,grpc,torch]" \
    && rm -rf /wheels
USER 10001
# matplotlib's font cache, built once here instead of on the first picture
RUN python -c "import matplotlib.font_manager"
EXPOSE 8000 8081
# the port the service listens on: PE_PORT, else PORT, else 8000 (service/settings.py)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PE_PORT', os.environ.get('PORT', '8000')) + '/healthz', timeout=2)"]
CMD ["pe-service"]
