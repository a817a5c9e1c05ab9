# One replica of the dashboard: `streamlit run dashboard.py` on port 8501, as an unprivileged user, with a
# HEALTHCHECK on Streamlit's own /_stcore/health. compose.yaml runs several behind HAProxy (deploy/haproxy.cfg).
#
#   docker build -t attention-lab .        (or: podman build --format docker -t attention-lab .)
#   docker run --rm -p 8501:8501 --memory 690m attention-lab
#
# The base is Debian's (its python3 is 3.11, the version the project is tested with). Where base images cannot
# be fetched, import one built from Debian's packages and pass it as BASE (the README's "Containers" says how).
# pip installs requirements.txt: uv.lock's export (`uv export --no-dev`), every package of the app pinned with
# its hashes, so --no-deps installs exactly the locked set (the same as `uv sync --locked --no-dev`, without
# needing uv in the image); torch is the CPU wheel from PyTorch's index. PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS / PIP_CERT may point pip at a mirror, a
# wheelhouse or a CA bundle mounted into the build (`podman build -v /opt/wheels:/opt/wheels:ro
# --build-arg PIP_FIND_LINKS=/opt/wheels ...`).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin lab

# Unset unless given: pip's own defaults.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_CERT
WORKDIR /app
COPY requirements.txt ./
# The dependencies first, in their own layer: a change to the app's code does not reinstall torch.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --retries 1 --timeout 5 --no-deps --require-hashes -r requirements.txt \
    && /opt/venv/bin/python -c "import torch, streamlit; print(torch.__version__, streamlit.__version__)"

COPY . .
# The app's own modules compiled here, as root: the replica runs with PYTHONDONTWRITEBYTECODE and cannot write /app,
# so they would be compiled from source at every start (pip has compiled the packages).
RUN /opt/venv/bin/python -m compileall -q assets attention server ui
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    OMP_NUM_THREADS=1
USER lab
EXPOSE 8501
# Healthy once Streamlit answers "ok"; the start period covers importing torch and Streamlit on a busy machine.
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request as u; sys.exit(u.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=3).read() != b'ok')"]
# exec form: Streamlit is PID 1 and gets the engine's SIGTERM itself.
CMD ["python", "-m", "streamlit", "run", "dashboard.py", "--server.port", "8501", "--server.address", "0.0.0.0", "--server.fileWatcherType", "none"]
