# One image for every Handoff service (web, worker, beat, simulator); compose picks the command.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HANDOFF_RUN_DIR=/app/.run

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
# Static files are collected into the image; WhiteNoise serves them with far-future caching.
RUN SECRET_KEY=collectstatic-only DEBUG=0 python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home-dir /app handoff \
    && mkdir -p /app/.run && chown handoff /app/.run

USER handoff
EXPOSE 8000
CMD ["python", "manage.py", "serve", "-b", "0.0.0.0", "-p", "8000"]
