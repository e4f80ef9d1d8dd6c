# syntax=docker/dockerfile:1
# The service as a small image: the package is built into a wheel in one stage and
# installed, without build or test tools, into a slim runtime image.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PE_HOST=0.0.0.0 \
    PE_PORT=8000
RUN useradd --no-log-init --create-home --uid 10001 pe
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PE_PORT', '8000') + '/healthz', timeout=2)"]
CMD ["pe-service"]
