# API and worker image of reward-service (one image, two commands; see docker-compose.yml).
# The simulations themselves run in the simulation image (sim_images/), started by the worker
# through the Docker socket: this image needs no simulator, only the service.
#
#   docker build --network host --build-arg EXTRA_CA="$(cat /usr/local/share/ca-certificates/*.crt)" \
#                -t reward-service:latest .
# EXTRA_CA (optional, public PEM certificates) is for builds behind an intercepting HTTPS proxy;
# scripts/build_images.sh passes the host's local CAs. Classic builder compatible (no BuildKit).
FROM debian:bookworm

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

ARG EXTRA_CA=""
RUN if [ -n "$EXTRA_CA" ]; then \
      mkdir -p /usr/local/share/ca-certificates && printf '%s\n' "$EXTRA_CA" > /usr/local/share/ca-certificates/extra-ca.crt; \
    fi \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates python3 python3-venv \
 && (update-ca-certificates >/dev/null 2>&1 || true) \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first (a layer that survives code edits), then the package itself.
COPY pyproject.toml /src/
RUN python3 -m venv /opt/rs \
 && python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["server"]))' > /tmp/reqs.txt
RUN /opt/rs/bin/pip install -q --cert /etc/ssl/certs/ca-certificates.crt -r /tmp/reqs.txt
# README.md (the package metadata reads it) only here: a README edit must not reinstall the dependencies
COPY README.md /src/
COPY reward_service /src/reward_service
COPY workers /src/workers
RUN /opt/rs/bin/pip install -q --no-deps --cert /etc/ssl/certs/ca-certificates.crt /src \
 && /opt/rs/bin/reward-service --help >/dev/null

ENV PATH=/opt/rs/bin:$PATH \
    REWARD_SERVICE_CACHE_DIR=/var/cache/reward-service
RUN useradd --system --uid 10001 --home-dir /var/lib/reward-service --create-home rs \
 && mkdir -p /var/cache/reward-service && chown rs:rs /var/cache/reward-service
USER rs
WORKDIR /var/lib/reward-service
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["reward-service", "serve", "--host", "0.0.0.0", "--port", "8000"]
