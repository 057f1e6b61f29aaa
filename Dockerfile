# syntax=docker/dockerfile:1
# mqha image: one image for every process. The console scripts are the commands:
#   docker run --rm mqha mqcontroller -c /etc/mqha/controller.conf
#   docker run --rm mqha mqbroker -c /etc/mqha/broker.conf
#   docker run --rm mqha mqadmin getControllerMetaData -a host:9878
#   docker run --rm mqha mqproxy -c /etc/mqha/proxy.conf   (the proxy extra is installed)
# The Helm chart (helm/mqha) starts them through its run.sh, which execs the command as PID 1.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
# A virtualenv at its final path, copied whole into the runtime stage (compiled .pyc included, so a
# read-only root file system is fine).
# gcc builds the commit-log codec's compiled fast path (mqha/broker/commitlog/_native.c); the runtime stage
# needs only the built module. The last check fails the build if the codec fell back to pure Python.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/mqha \
    && /opt/mqha/bin/pip install --upgrade pip \
    && /opt/mqha/bin/pip install ".[proxy]" \
    && /opt/mqha/bin/mqcontroller --help >/dev/null \
    && /opt/mqha/bin/mqbroker --help >/dev/null \
    && /opt/mqha/bin/mqadmin --help >/dev/null \
    && /opt/mqha/bin/python -c "import mqha.proxy.v2" \
    && /opt/mqha/bin/python -c "from mqha.broker.commitlog.native import NATIVE, NATIVE_STATUS; assert NATIVE, NATIVE_STATUS"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="mqha" \
      org.opencontainers.image.description="RocketMQ 5 controller-mode HA in Python: controller, broker, mqproxy, mqadmin" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 mqha \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/mqha --create-home \
       --shell /usr/sbin/nologin mqha \
    && install -d -o 10001 -g 10001 /var/lib/mqha
COPY --from=build /opt/mqha /opt/mqha
ENV PATH=/opt/mqha/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /home/mqha
# controller API and Raft (API + controllerRaftPortOffset), broker listenPort and haListenPort, mqproxy gRPC
EXPOSE 9878 9879 10911 10912 8081
CMD ["mqadmin", "--help"]
