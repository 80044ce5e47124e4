# syntax=docker/dockerfile:1
# simdra node image: the DRA kubelet plugin, run as `simdra run` by the DaemonSet
# (deploy/). Build from the repository root:  docker build -t simdra:latest .
#
# Both stages use the same base image: the virtual environment built in the first stage
# links to that image's Python, so the runtime stage must have the very same one.
# Python 3.11: the oldest Python simdra supports and the one Debian bookworm ships, so the
# e2e (tests/e2e/images.sh), which builds this file on a Debian bookworm base of its own,
# runs the same Python minor as this default (docs/operator.md "Build and push the image").
# tests/deploy/test_image_install.py replays the build stage without Docker.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG VENV=/opt/simdra

FROM ${PYTHON_IMAGE} AS build
ARG VENV
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, in a layer of their own that only the locks invalidate: a code
# change rebuilds just the last layer. Exactly the versions and files of
# requirements/runtime.lock (pyproject.toml's [project].dependencies resolved by
# hack/lock-deps.sh): every file's sha256 is checked, nothing unlisted comes in
# (--no-deps; `pip check` fails the build if the lock misses a dependency), and only
# wheels, so no sdist runs build code fetched unhashed. The demo's harness and its
# dependencies (the `demo` extra) are not in it.
# The kubernetes client (37+) also ships an asyncio copy of itself, about 70 MB, that
# simdra never imports: it is left out of the image.
COPY requirements/runtime.lock requirements/build.lock ./
RUN python -m venv "$VENV" \
 && "$VENV/bin/pip" install --require-hashes --no-deps --only-binary=:all: --requirement runtime.lock \
 && "$VENV/bin/pip" check \
 && rm -rf "$VENV/lib/python"*/site-packages/kubernetes/aio
COPY README.md pyproject.toml ./
# simdra/_driver/testing (the harness `simdra demo` runs) is not in the build context
# (.dockerignore), so the package installed here has none of it.
COPY simdra ./simdra
# The package itself, built with the locked setuptools (hash-checked like the rest) and no
# dependency resolution (all there already). setuptools and pip go afterwards: the image
# never installs anything.
RUN "$VENV/bin/pip" install --require-hashes --no-deps --only-binary=:all: --requirement build.lock \
 && "$VENV/bin/pip" install --no-deps --no-build-isolation --no-index . \
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
