# cortex-workers: one image for every process (API, workers, beat, migrate, Flower); the command
# picks the role. See compose.yaml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Install the package (and its console script `cortex-workers`).
COPY pyproject.toml README.md ./
COPY cortex_workers ./cortex_workers
COPY config ./config
COPY beat ./beat
RUN pip install ".[mcp]" \
 && rm -rf cortex_workers build *.egg-info
# What stays in /app: config/ (cortex.toml, alembic.ini, the Celery and ASGI entry points) and
# beat/; the package itself runs from site-packages.

# The config file in force is the copy in /app (edit or mount it there); override to use another.
ENV CORTEX_CONFIG=/app/config/cortex.toml

RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home cortex
USER cortex

EXPOSE 8000
CMD ["cortex-workers", "api", "--host", "0.0.0.0"]
