# quotree's operator (with its admission webhooks) as a container image.
#
#   make image                       builds it here (hack/image.sh: a debootstrapped Debian
#                                    bookworm base, because this machine reaches no registry)
#   podman build -t quotree .        anywhere a registry is reachable (python:3.11-slim)
#
# Two stages: the first makes a virtual environment in /opt/quotree (dependencies first, so a
# code change rebuilds only the last layers); the second copies only that environment onto
# a clean base. It runs as UID 65532, writes nothing outside the directories the Deployment
# mounts (/tmp; the webhook certificates in QUOTREE_CERT_DIR), so readOnlyRootFilesystem works.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# Only given by hack/image.sh behind a TLS-intercepting proxy: the CA bundle pip must trust.
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/quotree
WORKDIR /src
# The dependencies alone, from pyproject.toml: this layer is reused until they change.
COPY pyproject.toml ./
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/quotree/bin/pip install --quiet -r requirements.txt
COPY README.md ./
COPY quotree ./quotree
COPY operator ./operator
COPY webhooks ./webhooks
RUN /opt/quotree/bin/pip install --quiet --no-deps . \
 && /opt/quotree/bin/python -m compileall -q /opt/quotree \
 && /opt/quotree/bin/pip uninstall --quiet --yes pip

FROM ${BASE_IMAGE}
COPY --from=build /opt/quotree /opt/quotree
ENV PATH=/opt/quotree/bin:/usr/local/bin:/usr/bin:/bin \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    QUOTREE_CERT_DIR=/tmp/webhook-pki
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["kopf", "run", "--all-namespaces", "--standalone", "-m", "quotree_main"]
