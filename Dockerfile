# simdra node image: the DRA kubelet plugin, run as `simdra run` by the DaemonSet.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY driver ./driver
RUN python -m venv /opt/simdra \
 && /opt/simdra/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/simdra/bin/pip install --no-cache-dir .

FROM python:3.12-slim
LABEL org.opencontainers.image.title="simdra" \
      org.opencontainers.image.description="Kubernetes DRA kubelet plugin (fake and sysfs devices)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://example.invalid/simdra"
COPY --from=build /opt/simdra /opt/simdra
ENV PATH=/opt/simdra/bin:$PATH PYTHONUNBUFFERED=1
ENTRYPOINT ["simdra", "run"]
