# syntax=docker/dockerfile:1
# simdra node image: the DRA kubelet plugin, run as `simdra run` by the DaemonSet
# (deploy/). Build from the repository root:  docker build -t simdra:latest .
#
# Both stages use the same base image: the virtual environment built in the first stage
# links to that image's Python, so the runtime stage must have the very same one.
# tests/deploy/test_image_install.py replays the build stage without Docker.
ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG VENV=/opt/simdra

FROM ${PYTHON_IMAGE} AS build
ARG VENV
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, in a layer of their own that only pyproject.toml invalidates: a code
# change rebuilds just the last layer. They come from pyproject.toml's
# [project].dependencies only (no ad-hoc installs), listed by the image's own Python.
# The kubernetes client (37+) also ships an asyncio copy of itself, about 70 MB, that
# simdra never imports: it is left out of the image.
COPY pyproject.toml ./
RUN python -m venv "$VENV" \
 && python -c 'import tomllib; deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]; print("\n".join(deps))' > requirements.txt \
 && "$VENV/bin/pip" install --prefer-binary --requirement requirements.txt \
 && rm -rf "$VENV/lib/python"*/site-packages/kubernetes/aio
COPY README.md ./
COPY driver ./driver
# The package itself, with no dependency resolution (all there already). pip (and the
# setuptools some Pythons seed venvs with) go afterwards: the image never installs
# anything.
RUN "$VENV/bin/pip" install --no-deps . \
 && "$VENV/bin/pip" uninstall --yes setuptools pip

FROM ${PYTHON_IMAGE}
ARG VENV
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="simdra" \
      org.opencontainers.image.description="Kubernetes DRA kubelet plugin (fake and sysfs devices)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://example.invalid/simdra"
COPY --from=build ${VENV} ${VENV}
ENV PATH=${VENV}/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Runs as root: the kubelet's plugin and registration directories on the host are
# root-owned. The DaemonSet drops every capability it does not need.
USER 0
ENTRYPOINT ["simdra", "run"]
